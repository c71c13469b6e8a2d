"""Record security events in the audit log and announce them with a signal.

``record(kind, ...)`` writes one :class:`~mcp_oauth.models.AuditEvent` and sends
:data:`audit_event` (``sender=AuditEvent, event=…``) so sites can forward events
(SIEM, e-mail). Values that look like secrets never get in: ``detail`` keys named
like a credential are dropped.
"""

from __future__ import annotations

from typing import Any

from django.dispatch import Signal
from django.http import HttpRequest

audit_event = Signal()

#: ``detail`` keys that are never stored, whatever the caller passes.
SECRET_KEYS = frozenset(
    {"access_token", "refresh_token", "token", "code", "code_verifier", "client_secret", "password",
     "registration_access_token", "authorization", "assertion", "id_token"}
)


def _client_ip(request: HttpRequest | None) -> str | None:
    if request is None:
        return None
    return request.META.get("REMOTE_ADDR") or None


def record(
    kind: str,
    *,
    request: HttpRequest | None = None,
    user: Any = None,
    client_id: str = "",
    detail: dict[str, Any] | None = None,
):
    """Write one audit event and send :data:`audit_event`.

    :param kind: an :class:`AuditEvent.Kind` value, e.g. ``AuditEvent.Kind.TOKEN_ISSUED``.
    :param request: the Django request, for the client IP (and the user when ``user`` is not given).
    :param detail: non-secret facts; keys in :data:`SECRET_KEYS` are dropped.
    :returns: the saved :class:`~mcp_oauth.models.AuditEvent`.
    :raises ValueError: an unknown ``kind``.
    """
    from .models import AuditEvent

    if kind not in AuditEvent.Kind.values:
        raise ValueError(f"unknown audit event kind {kind!r}")
    if user is None and request is not None:
        candidate = getattr(request, "user", None)
        if candidate is not None and getattr(candidate, "is_authenticated", False):
            user = candidate
    clean = {key: value for key, value in (detail or {}).items() if key.lower() not in SECRET_KEYS}
    event = AuditEvent.objects.create(
        kind=kind,
        user=user if getattr(user, "pk", None) else None,
        client_id=str(client_id or "")[:255],
        ip_address=_client_ip(request),
        detail=clean,
    )
    audit_event.send(sender=AuditEvent, event=event)
    return event
