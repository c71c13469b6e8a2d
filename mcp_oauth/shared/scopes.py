"""Scopes: ``offline_access``, the scope hierarchy, and what a challenge asks for.

* ``offline_access`` (OpenID Connect Core §11; MCP 2026-07-28 "Refresh tokens"): the
  authorization server accepts it whenever it issues refresh tokens (it is listed in the AS
  metadata ``scopes_supported`` and shown on the consent page). It changes nothing in what is
  issued: an authorization-code grant gets a rotating refresh token with or without it (MCP
  clients depend on refreshing), and the scope is carried on the tokens and the consent. MCP
  documents never advertise it: the protected-resource metadata ``scopes_supported`` and
  every ``WWW-Authenticate`` challenge leave it out (2026-07-28 guidance).
* Scope hierarchy (``MCP_OAUTH["SCOPE_HIERARCHY"]``, e.g. ``{"mcp:admin": ["mcp"]}``): a
  scope grants the scopes it lists, transitively. :func:`missing` honours it when checking a
  token, and :func:`challenge_scopes` names every scope an operation needs in one
  challenge, without one a needed broader scope already implies (MCP 2026-07-28 "Scope
  challenge handling": one challenge, consistent across calls, hierarchies accounted for).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.core.checks import Error
from oauth2_provider.scopes import SettingsScopes
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.settings import mcp_oauth_settings

OFFLINE_ACCESS = "offline_access"
OFFLINE_ACCESS_DESCRIPTION = "Stay connected when you are not using the application"


def refresh_tokens_issued() -> bool:
    """Whether the authorization server issues refresh tokens (``refresh_token`` is a supported grant)."""
    return "refresh_token" in (oauth2_settings.OAUTH2_GRANT_TYPES_SUPPORTED or [])


class MCPScopes(SettingsScopes):
    """DOT ``SCOPES_BACKEND_CLASS``: the site's ``SCOPES`` plus ``offline_access`` when refresh tokens are issued.

    ``offline_access`` is never a default scope.
    """

    def get_all_scopes(self) -> dict[str, str]:
        scopes = dict(super().get_all_scopes())
        if refresh_tokens_issued():
            scopes.setdefault(OFFLINE_ACCESS, OFFLINE_ACCESS_DESCRIPTION)
        return scopes

    def get_available_scopes(self, application=None, request=None, *args, **kwargs) -> list[str]:
        scopes = list(super().get_available_scopes(application, request, *args, **kwargs))
        if refresh_tokens_issued() and OFFLINE_ACCESS not in scopes:
            scopes.append(OFFLINE_ACCESS)
        return scopes

    def get_default_scopes(self, application=None, request=None, *args, **kwargs) -> list[str]:
        return [s for s in super().get_default_scopes(application, request, *args, **kwargs) if s != OFFLINE_ACCESS]


def advertised(scopes: Iterable[str]) -> list[str]:
    """``scopes`` as MCP documents and challenges may show them: without ``offline_access``, no duplicates."""
    return [scope for scope in dict.fromkeys(scopes) if scope != OFFLINE_ACCESS]


def hierarchy() -> dict[str, tuple[str, ...]]:
    """``SCOPE_HIERARCHY`` as ``{scope: (implied scopes…)}`` (malformed entries are ignored; see :func:`check_settings`)."""
    raw = mcp_oauth_settings.SCOPE_HIERARCHY or {}
    if not isinstance(raw, dict):
        return {}
    return {
        str(parent): tuple(str(child) for child in children)
        for parent, children in raw.items()
        if isinstance(children, (list, tuple))
    }


def implied(scopes: Iterable[str]) -> set[str]:
    """``scopes`` and everything they grant through the hierarchy (transitively; cycles are harmless)."""
    tree = hierarchy()
    result: set[str] = set()
    pending = list(scopes)
    while pending:
        scope = pending.pop()
        if scope in result:
            continue
        result.add(scope)
        pending.extend(tree.get(scope, ()))
    return result


def missing(granted: Iterable[str], needed: Iterable[str]) -> list[str]:
    """The scopes of ``needed`` that ``granted`` does not grant, even through the hierarchy (in ``needed`` order)."""
    granted = granted if isinstance(granted, (set, frozenset)) else set(granted)
    needed = list(needed)
    if all(scope in granted for scope in needed):  # the hierarchy only adds scopes
        return []
    have = implied(granted)
    return [scope for scope in dict.fromkeys(needed) if scope not in have]


def challenge_scopes(needed: Iterable[str]) -> list[str]:
    """The ``scope`` of a challenge for an operation that needs ``needed`` (every scope, in one challenge).

    Duplicates and ``offline_access`` are dropped, and so is any scope another needed scope
    implies (``{"mcp:admin": ["mcp"]}``: needing ``mcp`` and ``mcp:admin`` asks for
    ``mcp:admin``). Order is the order of ``needed``, so the same operation always gets the same
    challenge.
    """
    scopes = advertised(needed)
    closures = {scope: implied([scope]) for scope in scopes}
    return [
        scope
        for scope in scopes
        if not any(other != scope and scope in closures[other] and other not in closures[scope] for other in scopes)
    ]


def check_settings() -> list:
    """System-check messages: ``mcp_oauth.E041`` for a malformed ``SCOPE_HIERARCHY``."""
    raw = mcp_oauth_settings.SCOPE_HIERARCHY
    if raw in (None, {}):
        return []
    if not isinstance(raw, dict) or not all(
        isinstance(parent, str) and isinstance(children, (list, tuple)) and all(isinstance(c, str) for c in children)
        for parent, children in raw.items()
    ):
        return [
            Error(
                'MCP_OAUTH["SCOPE_HIERARCHY"] must map a scope to a list of the scopes it grants, '
                'e.g. {"mcp:admin": ["mcp"]}.',
                id="mcp_oauth.E041",
            )
        ]
    return []
