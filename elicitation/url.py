"""URL-mode elicitation (SEP-1036; MCP 2025-11-25 "Elicitation" / "URL Mode").

The server sends the user, through their MCP client, to a page of its own
(:attr:`Elicitation.url <elicitation.models.Elicitation.url>`, ``https://<site>/elicitation/<id>/``)
where the interaction that must not pass through the client happens: connecting a
third-party account (OAuth), typing an API key, paying. The link carries only an
opaque, single-use, expiring id: no user id, session id or token (MCP "Safe URL Handling").
The page checks that the logged-in user is the one who was asked, at the start and at
the end. When it is over, ``notifications/elicitation/complete`` goes to the one MCP
session that asked, through that session's outbox (:mod:`elicitation.tasks`).

Two ways to hand the link to the client:

* as JSON-RPC error ``-32042`` (:class:`UrlElicitationRequired`) ending the tool call, with
  ``data.elicitations = [{mode: "url", elicitationId, url, message}]``; the client shows the
  link, waits for the completion notification, and retries the call
  (:func:`require_connection`, :func:`require_secret` do this);
* as ``elicitation/create`` with ``mode: "url"`` during the call (:func:`elicit_url`).

Clients that did not declare ``elicitation.url`` (``elicitation: {}`` means form only)
never receive either: they get a tool error saying what to do instead.

For ordinary Django code (a view, a webhook): :func:`create_url_elicitation` and
:func:`complete_elicitation`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from mcp_oauth import audit
from mcp_oauth.loopback import is_https_or_loopback
from mcp_oauth.models import AuditEvent, McpSession
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.text import storable
from mcp_oauth.tools import McpError, ToolContext, ToolError
from mcp_oauth.transport.jsonrpc import URL_ELICITATION_REQUIRED

from .models import Elicitation, StoredSecret, ThirdPartyConnection, ThirdPartyProvider
from .settings import elicitation_settings
from .signals import elicitation_finished

__all__ = [
    "URL_ELICITATION_REQUIRED",
    "ConnectedAccount",
    "UrlElicitationRequired",
    "UrlResult",
    "complete_elicitation",
    "create_url_elicitation",
    "elicit_url",
    "get_secret",
    "require_connection",
    "require_secret",
    "supports_url",
]

logger = logging.getLogger("elicitation.url")

#: Protocol revisions that know URL mode (SEP-1036 is part of 2025-11-25).
FIRST_REVISION_WITH_URL_MODE = "2025-11-25"
#: JSON-RPC ids of ``elicitation/create`` requests this app sends: ``"elicitation-<elicitation_id>"``.
REQUEST_ID_PREFIX = "elicitation-"


def supports_url(capabilities: Mapping[str, Any] | None, protocol_version: str | None = None) -> bool:
    """Whether a client may receive URL-mode elicitation and ``-32042``.

    SEP-1036 "Capabilities": only ``"elicitation": {"url": {}, …}`` declares URL mode;
    ``"elicitation": {}`` is form only; a revision older than 2025-11-25 has no URL mode.
    """
    if protocol_version is not None and str(protocol_version) < FIRST_REVISION_WITH_URL_MODE:
        return False
    if not isinstance(capabilities, Mapping):
        return False
    declared = capabilities.get("elicitation")
    return isinstance(declared, Mapping) and isinstance(declared.get("url"), Mapping)


def describe(elicitation: Elicitation) -> dict[str, str]:
    """The URL-mode elicitation as the client sees it: ``{mode, elicitationId, url, message}``."""
    return {
        "mode": "url",
        "elicitationId": elicitation.elicitation_id,
        "url": elicitation.url,
        "message": elicitation.message,
    }


class UrlElicitationRequired(McpError):
    """JSON-RPC error ``-32042`` (SEP-1036 "URL Elicitation Required"): raise it from a tool to end
    the call and hand the client the links it must open before retrying.

    ``data`` is ``{"elicitations": [{"mode": "url", "elicitationId", "url", "message"}, …]}``.
    Only raise it for a client that :func:`supports_url` (the helpers of this module check).
    """

    def __init__(self, elicitations: Sequence[Elicitation], message: str = "This request requires more information.") -> None:
        if not elicitations:
            raise ValueError("UrlElicitationRequired needs at least one elicitation")
        self.elicitations = list(elicitations)
        super().__init__(URL_ELICITATION_REQUIRED, message, {"elicitations": [describe(e) for e in elicitations]})


class UrlElicitationUnsupported(ToolError):
    """The client cannot open links for the user (no ``elicitation.url``); the message says what to do."""


def _check_link_scheme() -> None:
    """SEP-1036 "URL security requirements": https only (http only for a loopback development site)."""
    if not is_https_or_loopback(mcp_oauth_settings.base_url):
        raise ImproperlyConfigured('URL elicitation needs an https MCP_OAUTH["BASE_URL"] (http only on loopback)')


def create_url_elicitation(
    *,
    user: Any,
    session: McpSession | str,
    message: str,
    kind: str,
    provider: ThirdPartyProvider | str | None = None,
    scopes: Iterable[str] = (),
    secret_name: str = "",
    target_url: str = "",
    tool_name: str = "",
    request_id: Any = None,
    ttl_seconds: float | None = None,
    send: bool = False,
) -> Elicitation:
    """Create a pending URL-mode elicitation for ``user``'s MCP ``session`` (sync; any Django code).

    :param kind: ``"connect"`` (needs ``provider``, optional ``scopes``), ``"secret"`` (needs
        ``secret_name``: the secure input page stores the value under it) or ``"external"``
        (needs an https ``target_url``: after the identity check the page sends the user there,
        and the site calls :func:`complete_elicitation` when the interaction is over).
    :param tool_name: the tool asking (shown on the page; at most 128 characters kept).
    :param session: the :class:`~mcp_oauth.models.McpSession` (or its id) that will be told;
        it must be live and belong to ``user``.
    :param send: also put ``elicitation/create`` (``mode: "url"``) in the session's outbox, so the
        client shows the link without a tool call (the session must declare URL mode).
    :param ttl_seconds: lifetime of the link; default ``ELICITATION["URL_ELICITATION_TTL_SECONDS"]``.
    :returns: the saved :class:`~elicitation.models.Elicitation`; give the client :attr:`~Elicitation.url`.
    :raises ValueError: a bad argument (unknown or disabled provider, missing field, dead session,
        another user's session, empty message, a non-https target).
    :raises ImproperlyConfigured: the site is not served over https (or loopback).
    """
    _check_link_scheme()
    if not isinstance(message, str) or not message.strip() or not storable(message) or len(message) > 2000:
        raise ValueError("a URL elicitation needs a non-empty message (at most 2000 characters, no NUL)")
    if isinstance(session, str):
        live: McpSession | None = McpSession.objects.live().filter(pk=session).first()
        if live is None:
            raise ValueError("no live MCP session with that id")
        session = live
    elif not McpSession.objects.live().filter(pk=session.pk).exists():
        raise ValueError("the MCP session has ended")
    if getattr(user, "pk", None) is None or session.user_id != user.pk:
        raise ValueError("the MCP session belongs to another user")
    fields: dict[str, Any] = {}
    if kind == Elicitation.Kind.CONNECT:
        if not isinstance(provider, ThirdPartyProvider):
            provider = ThirdPartyProvider.objects.filter(slug=str(provider or "")).first()
        if provider is None or not provider.enabled:
            raise ValueError("unknown or disabled third-party provider")
        requested = list(dict.fromkeys([*provider.scope_list, *scopes]))
        fields.update(provider=provider, scopes=" ".join(requested))
    elif kind == Elicitation.Kind.SECRET:
        if not secret_name or len(secret_name) > 100 or not storable(secret_name):
            raise ValueError("a secret elicitation needs a secret_name (at most 100 characters)")
        fields["secret_name"] = secret_name
    elif kind == Elicitation.Kind.EXTERNAL:
        if not is_https_or_loopback(target_url):
            raise ValueError("an external elicitation needs an https target_url")
        fields["target_url"] = target_url
    else:
        raise ValueError(f"unknown URL elicitation kind {kind!r}")
    ttl = float(elicitation_settings.URL_ELICITATION_TTL_SECONDS if ttl_seconds is None else ttl_seconds)
    if ttl <= 0:
        raise ValueError("ttl_seconds must be positive")
    with transaction.atomic():
        row = Elicitation.objects.create(
            mode=Elicitation.Mode.URL,
            kind=kind,
            message=message,
            user=user,
            session=session,
            request_id="" if request_id is None else json.dumps(request_id)[:200],
            tool_name=str(tool_name or "")[:128],
            expires_at=timezone.now() + timedelta(seconds=ttl),
            **fields,
        )
        if send:
            if not supports_url(session.client_capabilities, session.protocol_version):
                raise ValueError("the MCP session's client did not declare URL-mode elicitation")
            from mcp_oauth.transport.sessions import enqueue_session_message

            enqueue_session_message(
                session.pk,
                {"id": REQUEST_ID_PREFIX + row.elicitation_id, "method": "elicitation/create", "params": describe(row)},
            )
    return row


def finish_elicitation(
    elicitation_id: str,
    status: str = Elicitation.Status.COMPLETED,
    *,
    user: Any = None,
    request: Any = None,
    error: str = "",
) -> bool:
    """Mark a pending URL elicitation ``status`` (``completed``, ``cancelled`` or ``declined``) and
    queue its completion notification (sent after the transaction commits).

    :returns: False (and nothing changes) for an unknown, expired, finished or form elicitation,
        or one of another user when ``user`` is given.
    """
    if status not in {Elicitation.Status.COMPLETED, Elicitation.Status.CANCELLED, Elicitation.Status.DECLINED}:
        raise ValueError(f"a URL elicitation cannot finish as {status!r}")
    if not isinstance(elicitation_id, str) or not elicitation_id or len(elicitation_id) > 64:
        return False
    with transaction.atomic():
        row = (
            Elicitation.objects.select_for_update()
            .filter(elicitation_id=elicitation_id, mode=Elicitation.Mode.URL, status=Elicitation.Status.PENDING)
            .first()
        )
        if row is None or row.is_expired:
            return False
        if user is not None and row.user_id != getattr(user, "pk", None):
            return False
        row.status = status
        row.completed_at = timezone.now()
        row.error = error[:500]
        row.save(update_fields=["status", "completed_at", "error"])
        audit.record(
            AuditEvent.Kind.ELICITATION_FINISHED,
            request=request,
            user=row.user,
            client_id=row.session.application.client_id if row.session and row.session.application else "",
            detail={"elicitation": row.elicitation_id[:8], "kind": row.kind, "status": status},
        )
        transaction.on_commit(lambda: _queue_notification(row.pk))
        transaction.on_commit(lambda: elicitation_finished.send(sender=Elicitation, elicitation=row))
    return True


def _queue_notification(pk: int) -> None:
    from mcp_oauth.taskqueue import send_or_run

    from .tasks import notify_elicitation_complete

    send_or_run(notify_elicitation_complete, pk)  # no broker reachable: sent from this process


def complete_elicitation(elicitation_id: str, *, user: Any = None, request: Any = None) -> bool:
    """The external-completion hook: the out-of-band interaction of ``elicitation_id`` is done.

    Call it from the site's own code, e.g. a payment provider's signed webhook view, after
    checking the webhook's signature::

        @csrf_exempt
        def payment_webhook(request):
            event = verify_signature(request)          # your provider's check
            complete_elicitation(event["metadata"]["elicitation_id"])
            return HttpResponse(status=204)

    Marks the elicitation ``completed`` and sends ``notifications/elicitation/complete`` to the
    MCP session that asked (Celery task; retried; once). Idempotent.

    :returns: False for an unknown, expired or already finished id (nothing happens), True otherwise.
    """
    return finish_elicitation(elicitation_id, Elicitation.Status.COMPLETED, user=user, request=request)


# --- tool-facing API ------------------------------------------------------------------


@dataclass(frozen=True)
class UrlResult:
    """What :func:`elicit_url` got: the client's ``action`` (``accept`` means the user agreed to
    open the link, not that they finished), whether the interaction ``completed`` (only known when
    waiting), and the row."""

    action: Literal["accept", "decline", "cancel"]
    completed: bool
    elicitation: Elicitation


@dataclass(frozen=True)
class ConnectedAccount:
    """A usable third-party connection: ``access_token`` is fresh (refreshed if it had expired).

    Send it to the provider's API only, as ``Authorization: {token_type} {access_token}``;
    never return it from a tool.
    """

    provider: ThirdPartyProvider
    access_token: str = ""
    token_type: str = "Bearer"
    scopes: tuple[str, ...] = ()
    account_label: str = ""
    expires_at: datetime | None = None

    def __repr__(self) -> str:  # never show the token
        return f"ConnectedAccount(provider={self.provider.slug!r}, account_label={self.account_label!r})"

    @property
    def authorization_header(self) -> str:
        return f"{self.token_type} {self.access_token}"


def _user_of(ctx: ToolContext) -> Any:
    user = ctx.user
    if getattr(user, "pk", None) is None:
        raise ToolError("This tool needs a signed-in user (the token has none).")
    return user


SECRET_NEEDED = "This tool needs a value you must type on this site's secure page."


def _unsupported(what: str) -> UrlElicitationUnsupported:
    connections = mcp_oauth_settings.absolute(reverse("elicitation:connections"))
    return UrlElicitationUnsupported(
        f"{what} Your MCP client cannot open a link for that (it did not declare URL-mode elicitation). "
        f"Sign in at {connections} to do it there, then try again."
    )


def _find_connection(user: Any, provider_slug: str, scopes: list[str]) -> tuple[ThirdPartyProvider, ThirdPartyConnection | None]:
    provider = ThirdPartyProvider.objects.filter(slug=provider_slug, enabled=True).first()
    if provider is None:
        logger.error("require_connection: no enabled third-party provider %r (add it in the admin)", provider_slug)
        raise ToolError(f"This site has no enabled third-party provider {provider_slug[:50]!r}; ask its administrators.")
    connection = ThirdPartyConnection.objects.filter(user=user, provider=provider).select_related("provider").first()
    if connection is not None and not connection.covers(scopes):
        connection = None
    return provider, connection


async def require_connection(
    ctx: ToolContext, provider: str | ThirdPartyProvider, scopes: Iterable[str] = (), *, message: str | None = None
) -> ConnectedAccount:
    """The user's live connection to ``provider`` covering ``scopes``, or end the call with ``-32042``.

    With a connection: its access token, refreshed first when it has expired (a refused
    refresh deletes the connection and counts as none). Without one: a ``connect``
    elicitation is created for this user and session and :class:`UrlElicitationRequired`
    is raised; the user connects in the browser, the client gets
    ``notifications/elicitation/complete`` and retries the call, which then finds the connection.

    :param provider: a :class:`~elicitation.models.ThirdPartyProvider` or its ``slug``.
    :param scopes: scopes needed beyond the provider's default ones.
    :raises UrlElicitationRequired: no usable connection, and the client supports URL mode.
    :raises UrlElicitationUnsupported: no usable connection, and the client does not (a tool error
        naming the site's connections page); nothing is created.
    :raises ToolError: the provider could not be reached to refresh the token, or ``provider`` is
        not an enabled provider of this site (logged as an error: a configuration mistake).
    """
    from .providers import ProviderError, fresh_access_token

    user = _user_of(ctx)
    slug = provider.slug if isinstance(provider, ThirdPartyProvider) else str(provider)
    wanted = list(dict.fromkeys(scopes))
    provider_row, connection = await sync_to_async(_find_connection)(user, slug, wanted)
    if connection is not None:
        try:
            token = await sync_to_async(fresh_access_token)(connection)  # ORM: the request's own thread
        except ProviderError as exc:
            raise ToolError(f"{provider_row.name} could not be reached to refresh your connection ({exc.error}).") from None
        if token is not None:
            return ConnectedAccount(
                provider=provider_row,
                access_token=token,
                token_type=connection.token_type or "Bearer",
                scopes=tuple(connection.scope_list),
                account_label=connection.account_label,
                expires_at=connection.expires_at,
            )
    text = message or f"Connect your {provider_row.name} account to continue."
    if not supports_url(ctx.client_capabilities, ctx.protocol_version):
        raise _unsupported(f"This tool needs your {provider_row.name} account connected.")
    row = await sync_to_async(_pending_connect_request)(user, ctx.session, provider_row, wanted, text)
    if row is None:
        row = await sync_to_async(create_url_elicitation)(
            user=user, session=ctx.session, message=text, kind=Elicitation.Kind.CONNECT,
            provider=provider_row, scopes=wanted, request_id=ctx.request_id,
        )
    raise UrlElicitationRequired([row])


def _pending_connect_request(user: Any, session: McpSession, provider: ThirdPartyProvider, scopes: list[str], message: str) -> Elicitation | None:
    """The same session's unexpired pending request to connect ``provider`` for the same scopes, if any:
    a client retrying before the user finished gets the same link again, not one more row."""
    requested = " ".join(dict.fromkeys([*provider.scope_list, *scopes]))
    return (
        Elicitation.objects.filter(
            user=user, session=session, mode=Elicitation.Mode.URL, kind=Elicitation.Kind.CONNECT, provider=provider,
            scopes=requested, message=message, status=Elicitation.Status.PENDING, expires_at__gt=timezone.now(),
        )
        .order_by("-created_at")
        .first()
    )


def get_secret(user: Any, name: str) -> str | None:
    """The decrypted value ``user`` stored under ``name`` on the secure input page, or None.

    :raises DecryptionError: it exists but no configured key opens it.
    """
    row = StoredSecret.objects.filter(user=user, name=name).first()
    return None if row is None else row.value


async def require_secret(ctx: ToolContext, name: str, message: str) -> str:
    """The value the user stored under ``name``, or end the call with ``-32042`` pointing to the
    secure input page (same protocol as :func:`require_connection`).

    :raises UrlElicitationRequired: no value yet, and the client supports URL mode.
    :raises UrlElicitationUnsupported: no value yet, and the client does not: nothing is sent to it;
        the request waits for the user on the connections page (``/elicitation/connections/``),
        bound to the user and to no session.
    """
    user = _user_of(ctx)
    value = await sync_to_async(get_secret)(user, name)
    if value is not None:
        return value
    if not supports_url(ctx.client_capabilities, ctx.protocol_version):
        # The client cannot be given the link; the user finds the request on the connections
        # page instead (no session: nothing is ever sent to this client about it).
        await sync_to_async(_create_unsent_secret_request)(user, name, message)
        raise _unsupported(SECRET_NEEDED)
    row = await sync_to_async(create_url_elicitation)(
        user=user, session=ctx.session, message=message, kind=Elicitation.Kind.SECRET,
        secret_name=name, request_id=ctx.request_id,
    )
    raise UrlElicitationRequired([row])


def _create_unsent_secret_request(user: Any, name: str, message: str) -> Elicitation:
    """A pending ``secret`` elicitation listed on the user's connections page only (no session)."""
    _check_link_scheme()
    existing = (
        Elicitation.objects.filter(
            user=user, mode=Elicitation.Mode.URL, kind=Elicitation.Kind.SECRET, secret_name=name,
            status=Elicitation.Status.PENDING, session__isnull=True, expires_at__gt=timezone.now(),
        ).first()
    )
    if existing is not None:
        return existing
    ttl = float(elicitation_settings.URL_ELICITATION_TTL_SECONDS)
    return Elicitation.objects.create(
        mode=Elicitation.Mode.URL, kind=Elicitation.Kind.SECRET, message=message[:2000], secret_name=name,
        user=user, session=None, expires_at=timezone.now() + timedelta(seconds=ttl),
    )


async def _refresh_row(pk: int) -> Elicitation:
    return await Elicitation.objects.aget(pk=pk)


async def elicit_url(
    ctx: ToolContext,
    message: str,
    *,
    kind: str,
    provider: ThirdPartyProvider | str | None = None,
    scopes: Iterable[str] = (),
    secret_name: str = "",
    target_url: str = "",
    wait_seconds: float | None = 300,
    answer_timeout: float = 300,
) -> UrlResult:
    """Send ``elicitation/create`` with ``mode: "url"`` during the call, and (by default) wait until
    the user finishes on the page.

    :param kind: / provider / scopes / secret_name / target_url: as :func:`create_url_elicitation`.
    :param wait_seconds: after the client accepts, how long to wait for the interaction to finish
        (None: do not wait; ``completed`` is then False).
    :param answer_timeout: how long to wait for the client's accept / decline / cancel.
    :returns: :class:`UrlResult`.
    :raises UrlElicitationUnsupported: the client did not declare URL mode: nothing is sent to it
        (for ``kind="secret"`` the request waits for the user on the connections page, unbound to
        any session; otherwise nothing is created).
    :raises ElicitationUnsupported: the call is not streamed.
    :raises ElicitationTimeout: no answer from the client in time (the row expires).
    :raises ElicitationError: the client answered with an error or a malformed result.
    """
    from .api import ElicitationError, ElicitationTimeout, ElicitationUnsupported

    user = _user_of(ctx)
    if not supports_url(ctx.client_capabilities, ctx.protocol_version):
        if kind == Elicitation.Kind.SECRET and secret_name:
            await sync_to_async(_create_unsent_secret_request)(user, secret_name, message)
            raise _unsupported(SECRET_NEEDED)
        raise _unsupported("This tool needs you to open a page on this site.")
    if not ctx.streaming:
        raise ElicitationUnsupported("This tool needs to show you a link, but this connection cannot carry one.")
    row = await sync_to_async(create_url_elicitation)(
        user=user, session=ctx.session, message=message, kind=kind, provider=provider, scopes=scopes,
        secret_name=secret_name, target_url=target_url, request_id=ctx.request_id,
        tool_name=getattr(ctx, "tool_name", ""),
    )
    try:
        answer = await ctx.send_request(
            "elicitation/create", describe(row), timeout=answer_timeout,
            request_id=REQUEST_ID_PREFIX + row.elicitation_id, poll=_stored_answer(row.pk),
        )
    except TimeoutError:
        await _set_status(row, Elicitation.Status.EXPIRED, "no answer in time")
        raise ElicitationTimeout("Your MCP client did not show the link in time.") from None
    except McpError as exc:
        await _set_status(row, Elicitation.Status.CANCELLED, f"client error {exc.code}: {exc.message}")
        raise ElicitationError("Your MCP client could not show the link.") from None
    except asyncio.CancelledError:
        await asyncio.shield(_set_status(row, Elicitation.Status.CANCELLED, "tool call cancelled"))
        raise
    action = answer.get("action")
    if action in ("decline", "cancel"):
        status = Elicitation.Status.DECLINED if action == "decline" else Elicitation.Status.CANCELLED
        await _set_status(row, status)
        return UrlResult(action, False, row)
    if action != "accept":
        await _set_status(row, Elicitation.Status.CANCELLED, "malformed answer: no valid action")
        raise ElicitationError("Your MCP client sent a malformed answer.")
    if wait_seconds is None:
        return UrlResult("accept", False, row)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + float(wait_seconds)
    while True:
        row = await _refresh_row(row.pk)
        if row.status != Elicitation.Status.PENDING or loop.time() >= deadline:
            break
        await asyncio.sleep(min(float(mcp_oauth_settings.SSE_POLL_INTERVAL_SECONDS), max(0.0, deadline - loop.time())))
    return UrlResult("accept", row.status == Elicitation.Status.COMPLETED, row)


def _stored_answer(pk: int):
    """A ``poll`` for :meth:`ToolContext.send_request`: the answer another worker stored on the row."""

    async def poll() -> dict[str, Any] | None:
        answer = await Elicitation.objects.filter(pk=pk).values_list("client_answer", flat=True).afirst()
        return answer if isinstance(answer, dict) else None

    return poll


async def _set_status(row: Elicitation, status: str, error: str = "") -> None:
    """Finish a row the tool itself owns (declined, cancelled, expired): no notification."""
    await Elicitation.objects.filter(pk=row.pk, status=Elicitation.Status.PENDING).aupdate(
        status=status, error=error[:500], completed_at=timezone.now()
    )
    row.status = status
