"""The one ``WWW-Authenticate`` challenge builder: ``Bearer`` (RFC 6750 §3, RFC 9728 §5.1) and,
where DPoP applies, ``DPoP`` (RFC 9449 §7.1, :func:`www_authenticate`).

Used by the MCP endpoint, the DRF authentication class and the view decorator,
so every protected response of the site advertises the same metadata URL and
scopes (MCP 2025-11-25 "Protected Resource Metadata Discovery Requirements",
"Scope Challenge Handling").
"""

from __future__ import annotations

from collections.abc import Iterable

from django.http import HttpRequest, HttpResponse

from mcp_oauth.dpop.proof import supported_algorithms
from mcp_oauth.errors import OAuthError
from mcp_oauth.models import ProtectedResource
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.origins import as_requested
from mcp_oauth.shared.resource_uris import resource_path
from mcp_oauth.shared.scopes import challenge_scopes, missing

PRM_WELL_KNOWN = "/.well-known/oauth-protected-resource"


def resource_metadata_url(resource: ProtectedResource, request: HttpRequest | None = None) -> str:
    """Absolute URL of ``resource``'s RFC 9728 metadata, in path-inserted form (§3.1).

    ``https://host/mcp`` -> ``https://host/.well-known/oauth-protected-resource/mcp``; in the
    loopback spelling ``request`` used on a loopback development site (:mod:`mcp_oauth.shared.origins`).
    """
    return as_requested(mcp_oauth_settings.absolute(PRM_WELL_KNOWN + resource_path(resource.uri)), request)


def _quote(value: str) -> str:
    """RFC 7230 quoted-string body: backslash-escape ``"`` and ``\\``; drop CR/LF and other controls."""
    value = "".join(ch for ch in str(value) if ch >= " " and ch != "\x7f")
    return value.replace("\\", "\\\\").replace('"', '\\"')


def bearer_challenge(
    resource: ProtectedResource,
    *,
    error: str | None = None,
    error_description: str | None = None,
    scopes: Iterable[str] | None = None,
    request: HttpRequest | None = None,
) -> str:
    """The ``WWW-Authenticate`` value for ``resource``.

    Shape: ``Bearer resource_metadata="<url>", scope="<scopes>"`` followed by
    ``error="…"`` and ``error_description="…"`` when given. ``scopes`` defaults to
    the resource's required scopes; ``scope`` is omitted when there are none. The scopes go
    through :func:`mcp_oauth.shared.scopes.challenge_scopes` (no ``offline_access``, none implied by
    another listed scope).
    """
    scope_list = challenge_scopes(resource.scope_list if scopes is None else scopes)
    params = [("resource_metadata", resource_metadata_url(resource, request))]
    if scope_list:
        params.append(("scope", " ".join(dict.fromkeys(scope_list))))
    if error:
        params.append(("error", error))
    if error_description:
        params.append(("error_description", error_description))
    return "Bearer " + ", ".join(f'{key}="{_quote(value)}"' for key, value in params)


def dpop_challenge(
    resource: ProtectedResource,
    *,
    error: str | None = None,
    error_description: str | None = None,
    scopes: Iterable[str] | None = None,
    request: HttpRequest | None = None,
) -> str:
    """The ``DPoP`` challenge for ``resource`` (RFC 9449 §7.1, RFC 9728 §5.1).

    Shape: ``DPoP resource_metadata="<url>", scope="<scopes>", error="…", error_description="…",
    algs="ES256 …"`` (``scope``, ``error`` and ``error_description`` when there are any; ``algs``:
    ``DPOP_SIGNING_ALG_VALUES_SUPPORTED``).
    """
    bearer = bearer_challenge(
        resource, error=error, error_description=error_description, scopes=scopes, request=request
    )
    return "DPoP " + bearer[len("Bearer ") :] + f', algs="{_quote(" ".join(supported_algorithms()))}"'


def www_authenticate(
    resource: ProtectedResource,
    *,
    error: str | None = None,
    error_description: str | None = None,
    scopes: Iterable[str] | None = None,
    request: HttpRequest | None = None,
    dpop: bool = False,
) -> str:
    """The ``WWW-Authenticate`` value of a refusal at ``resource``: one challenge per scheme it accepts.

    * ``Bearer`` (:func:`bearer_challenge`) unless the resource requires DPoP;
    * ``DPoP`` (:func:`dpop_challenge`) when DPoP is on and the resource requires it or the
      failure concerns DPoP (``dpop``: a bound token came as Bearer, a proof failed) or ``request``
      used the DPoP scheme (an ``insufficient_scope`` of a DPoP request is a DPoP challenge too). The ``error`` then goes in the DPoP challenge, the Bearer one
      (first, for clients that read only the first challenge's ``resource_metadata``) has none.
    """
    if request is not None and not dpop:  # a request made with the DPoP scheme is answered in it
        dpop = request.headers.get("Authorization", "")[:5].lower() == "dpop "
    with_dpop = bool(supported_algorithms()) and (dpop or resource.dpop_required)
    if not with_dpop:
        return bearer_challenge(
            resource, error=error, error_description=error_description, scopes=scopes, request=request
        )
    challenges = [] if resource.dpop_required else [bearer_challenge(resource, scopes=scopes, request=request)]
    challenges.append(
        dpop_challenge(resource, error=error, error_description=error_description, scopes=scopes, request=request)
    )
    return ", ".join(challenges)


def challenge_response(
    resource: ProtectedResource,
    status: int = 401,
    *,
    error: str | None = None,
    error_description: str | None = None,
    scopes: Iterable[str] | None = None,
    request: HttpRequest | None = None,
    dpop: bool = False,
    dpop_nonce: str | None = None,
) -> HttpResponse:
    """A 401 or 403 response carrying :func:`bearer_challenge` and a JSON error body.

    The body is ``{"error": …, "error_description": …}``; without credentials there
    is no ``error`` code (RFC 6750 §3.1), only a description for people reading it.
    """
    return challenge_error(
        resource,
        status,
        error=error,
        error_description=error_description,
        scopes=scopes,
        request=request,
        dpop=dpop,
        dpop_nonce=dpop_nonce,
    ).response()


def challenge_error(
    resource: ProtectedResource,
    status: int = 401,
    *,
    error: str | None = None,
    error_description: str | None = None,
    scopes: Iterable[str] | None = None,
    request: HttpRequest | None = None,
    dpop: bool = False,
    dpop_nonce: str | None = None,
) -> OAuthError:
    """The :class:`~mcp_oauth.errors.OAuthError` of :func:`challenge_response` (raise it, or render it).

    ``dpop``: the failure concerns DPoP (:func:`www_authenticate`); ``dpop_nonce``: sent as
    ``DPoP-Nonce`` (RFC 9449 §9)."""
    description = error_description or (
        "This resource needs an OAuth access token in the Authorization header; "
        "the WWW-Authenticate header says where to get one."
    )
    return OAuthError(
        error,
        description,
        status=status,
        www_authenticate=www_authenticate(
            resource, error=error, error_description=error_description, scopes=scopes, request=request, dpop=dpop
        ),
        headers={"DPoP-Nonce": dpop_nonce} if dpop_nonce else None,
    )


def insufficient_scope_response(
    resource: ProtectedResource,
    operation_scopes: Iterable[str],
    granted_scopes: Iterable[str] = (),
    *,
    description: str | None = None,
    request: HttpRequest | None = None,
) -> HttpResponse:
    """403 ``insufficient_scope`` for an operation on ``resource`` needing ``operation_scopes`` (MCP 2026-07-28).

    One challenge names every scope the operation needs — the resource's required scopes and
    the operation's — minimised by ``SCOPE_HIERARCHY`` and without ``offline_access``
    (:func:`mcp_oauth.shared.scopes.challenge_scopes`), so the same operation always gets the same
    challenge whatever the token holds. ``granted_scopes`` only shape the default description
    (the scopes the token lacks).
    """
    needed = [*resource.scope_list, *operation_scopes]
    if description is None:
        lacking = missing(granted_scopes, needed)
        description = "The access token lacks the scopes: " + " ".join(lacking or challenge_scopes(needed))
    return challenge_response(
        resource, 403, error="insufficient_scope", error_description=description, scopes=needed, request=request
    )
