"""Record security events in the audit log and announce them with a signal.

``record(kind, ...)`` writes one :class:`~mcp_oauth.models.AuditEvent` and sends
:data:`audit_event` (``sender=AuditEvent, event=…``) so sites can forward events
(SIEM, e-mail). Values that look like secrets never get in: ``detail`` keys named
like a credential are dropped, and strings are cut to :data:`MAX_DETAIL_STRING`
characters with NUL characters and lone surrogates removed (a client-supplied value
can never turn the write into a database error).

Where each kind is written:

==================================  ===============================================================
``consent.granted``                 consent page approved (or approved automatically), authorization view
``consent.denied``                  consent page declined, authorization view
``token.issued``                    token endpoint, authorization_code / client_credentials / jwt-bearer /
                                    token-exchange (validator); ``detail.client_auth`` = ``private_key_jwt``
                                    when so authenticated, ``detail.idp`` / ``detail.sub`` for an ID-JAG,
                                    ``detail.subject_token_id`` / ``detail.delegated`` / ``detail.act`` for
                                    an RFC 8693 exchange
``token.exchange_refused``          an RFC 8693 token exchange refused after client authentication:
                                    ``detail = {"error", "description"}`` (the adapter's refusals included)
``token.refreshed``                 token endpoint, refresh_token grant (validator)
``token.revoked``                   RFC 7009 revocation of a stored token (validator); admin actions
``token.refresh_reuse``             a rotated-out refresh token presented again; its family is revoked
``code.replay``                     a used authorization code presented again with its verifier
                                    (receiver of :data:`mcp_oauth.signals.authorization_code_replayed`)
``resource.invalid``                RFC 8707 ``invalid_target`` at the authorization or token endpoint
``client.registered``               RFC 7591 registration accepted
``trust.denied``                    the trust policy refused a registration, fetch, authorization or grant
``cimd.fetch_failed``,              written by the Client ID Metadata Document fetcher
``cimd.ssrf_refused``
``identity.mismatch``               (``elicitation`` app) a user opened or finished another user's URL elicitation
``elicitation.finished``            (``elicitation`` app) a URL elicitation finished: ``detail.status`` is completed,
                                    cancelled or declined (start page, callback, external hook)
``connection.created``              (``elicitation`` app) a third-party account was connected
``connection.revoked``              (``elicitation`` app) a connection was revoked (user, admin, refused refresh)
``secret.stored``                   (``elicitation`` app) the secure input page stored a value (never the value)
``secret.deleted``                  (``elicitation`` app) the user deleted a stored value on the connections page
``assertion.refused``               a ``private_key_jwt`` client assertion or an ID-JAG failed a check:
                                    ``detail = {"assertion_kind", "reason", "description", ...}``
``assertion.replayed``              a JWT assertion's ``iss`` + ``jti`` presented a second time
``enterprise.identity_linked``      an ID-JAG subject linked to a local user (``detail.how``: email, created)
``organization.client_requested``   a member asked to use a client an organization admin has not approved yet
                                    (a pending ``OrganizationClient``; ``organization`` set)
``organization.client_refused``     an organization's policy refused a client (denied by its admin, its trust
                                    rules, its DCR/CIMD setting; ``detail.reason``; ``organization`` set)
``organization.client_approved``    an organization admin approved a client for their organization (admin action
``organization.client_denied``      or form): ``organization`` set, ``detail = {"via", "organization", "previous"}``
==================================  ===============================================================
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Any

from django.dispatch import Signal, receiver
from django.http import HttpRequest
from oauth2_provider.models import get_refresh_token_model

from mcp_oauth.models import AuditEvent
from mcp_oauth.shared.db import insert
from mcp_oauth.signals import authorization_code_replayed

audit_event = Signal()

#: ``detail`` keys that are never stored, whatever the caller passes.
SECRET_KEYS = frozenset(
    {
        "access_token",
        "refresh_token",
        "token",
        "code",
        "code_verifier",
        "client_secret",
        "password",
        "registration_access_token",
        "authorization",
        "assertion",
        "id_token",
    }
)


#: Longest string kept in ``detail`` (characters); longer ones are cut and end with "…".
MAX_DETAIL_STRING = 300
#: Most items kept in a ``detail`` list.
MAX_DETAIL_ITEMS = 20


def _client_ip(request: Any) -> str | None:
    """``REMOTE_ADDR`` of a Django request, or of an oauthlib request (DOT copies ``META`` into its headers)."""
    if request is None:
        return None
    meta = getattr(request, "META", None)
    if meta is None:
        meta = getattr(request, "headers", None) or {}
    value = meta.get("REMOTE_ADDR") if hasattr(meta, "get") else None
    if not value:
        return None
    try:
        return str(ipaddress.ip_address(str(value).split("%")[0]))
    except ValueError:
        return None


def _clean_text(value: str) -> str:
    value = value.replace("\x00", "").encode("utf-8", "ignore").decode("utf-8")
    if len(value) > MAX_DETAIL_STRING:
        value = value[: MAX_DETAIL_STRING - 1] + "…"
    return value


def _clean(value: Any, depth: int = 0) -> Any:
    """``value`` made JSON-safe and storable: secret keys dropped, strings cleaned and cut, containers capped."""
    if depth > 4:
        return None
    if isinstance(value, dict):
        return {
            _clean_text(str(key)): _clean(item, depth + 1)
            for key, item in list(value.items())[:MAX_DETAIL_ITEMS]
            if str(key).lower() not in SECRET_KEYS
        }
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_clean(item, depth + 1) for item in list(value)[:MAX_DETAIL_ITEMS]]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return _clean_text(str(value))


@functools.cache
def _kinds() -> frozenset[str]:
    return frozenset(AuditEvent.Kind.values)


def record(
    kind: str,
    *,
    request: HttpRequest | Any | None = None,
    user: Any = None,
    client_id: str = "",
    detail: dict[str, Any] | None = None,
    organization: Any = None,
):
    """Write one audit event and send :data:`audit_event`.

    :param kind: an :class:`AuditEvent.Kind` value, e.g. ``AuditEvent.Kind.TOKEN_ISSUED``.
    :param request: the Django request (or the oauthlib request of a DOT validator), for the
        client IP and the user when ``user`` is not given.
    :param detail: non-secret facts; keys in :data:`SECRET_KEYS` are dropped (at any depth),
        strings are cut to :data:`MAX_DETAIL_STRING` characters.
    :param organization: the :class:`~mcp_oauth.models.Organization` (or its primary key) the
        event concerns (``AuditEvent.organization``), or None.
    :returns: the saved :class:`~mcp_oauth.models.AuditEvent`.
    :raises ValueError: an unknown ``kind``.
    """
    event = write_event(kind, request=request, user=user, client_id=client_id, detail=detail, organization=organization)
    announce(event)
    return event


def write_event(
    kind: str,
    *,
    request: HttpRequest | Any | None = None,
    user: Any = None,
    client_id: str = "",
    detail: dict[str, Any] | None = None,
    organization: Any = None,
):
    """The writing half of :func:`record` (same parameters): the event is stored, not announced;
    call :func:`announce` with it once the transaction that wrote it has committed."""
    return insert(
        new_event(kind, request=request, user=user, client_id=client_id, detail=detail, organization=organization)
    )


def new_event(
    kind: str,
    *,
    request: HttpRequest | Any | None = None,
    user: Any = None,
    client_id: str = "",
    detail: dict[str, Any] | None = None,
    organization: Any = None,
):
    """The unsaved :class:`~mcp_oauth.models.AuditEvent` :func:`write_event` stores (same
    parameters and rules), for a caller that writes it with other rows.

    :raises ValueError: an unknown ``kind``.
    """
    if kind not in _kinds():
        raise ValueError(f"unknown audit event kind {kind!r}")
    if user is None and request is not None:
        candidate = getattr(request, "user", None)
        if candidate is not None and getattr(candidate, "is_authenticated", False):
            user = candidate
    return AuditEvent(
        kind=kind,
        user=user if getattr(user, "pk", None) else None,
        client_id=_clean_text(str(client_id or ""))[:255],
        ip_address=_client_ip(request),
        detail=_clean(dict(detail or {})),
        organization_id=getattr(organization, "pk", organization),
    )


def announce(event) -> None:
    """Send :data:`audit_event` for an event :func:`write_event` stored."""
    audit_event.send(sender=AuditEvent, event=event)


@receiver(authorization_code_replayed, dispatch_uid="mcp_oauth.audit.code_replayed")
def _code_replayed(sender, redeemed, application, **kwargs) -> None:
    """``code.replay``: a redeemed authorization code came back with its verifier (OAuth 2.1 §4.1.3)."""
    user = None
    if redeemed.token_family is not None:
        refresh_token = get_refresh_token_model().objects.filter(token_family=redeemed.token_family).first()
        user = getattr(refresh_token, "user", None)
    record(
        AuditEvent.Kind.CODE_REPLAY,
        request=kwargs.get("request"),
        user=user,
        client_id=getattr(application, "client_id", ""),
        detail={
            "redeemed_at": redeemed.redeemed_at.isoformat() if getattr(redeemed, "redeemed_at", None) else None,
            "tokens_revoked": bool(redeemed.access_token_id or redeemed.token_family),
        },
    )
