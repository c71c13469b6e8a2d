"""The tool-facing elicitation API: one tool body, both protocol eras (MCP 2025-11-25 and 2026-07-28
"Client Features / Elicitation", SEP-1036 URL mode, SEP-2322 multi round-trip requests).

::

    from elicitation.api import elicit_form, require_connection
    from elicitation.form import ElicitationSchema

    CITY = ElicitationSchema({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})

    @tool(scopes=["mcp"])
    async def weather(ctx: ToolContext) -> str:
        answer = await elicit_form(ctx, "Which city?", CITY)
        if answer.action != "accept":
            return "No city, no weather."
        return forecast(answer.content["city"])

How each helper reaches the user:

===========================  ======================================  ========================================
helper                       2025-11-25 session                      2026-07-28 request
===========================  ======================================  ========================================
:func:`elicit_form`          ``elicitation/create`` (form) on the    ``input_required`` with a form input
                             ``tools/call`` SSE stream; waits        request; the retry's answer is validated
:func:`elicit_url`           ``elicitation/create`` (url); waits     ``input_required`` with a URL input
                             for the page to finish                  request (no ``elicitationId``)
:func:`require_connection`,  JSON-RPC error ``-32042`` with the      ``input_required`` with a URL input
:func:`require_secret`       link; the client retries after          request; a retry whose flow is still in
                             ``notifications/elicitation/complete``  progress is held open until it finishes
===========================  ======================================  ========================================

In a 2026-07-28 request the tool body runs again from its start on every retry: each helper call
takes the next input key (:meth:`~mcp_oauth.mcp_server.transport.input_required.InputRound.next_key`), so a
body must ask in the same order each time, and work done before a helper call is done again.
An answer that is missing or does not match the form is asked again (another ``input_required``),
never an error. Every form or link is logged as an :class:`~elicitation.models.Elicitation`,
bound to the user (and to the session in 2025-11-25).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Literal

from asgiref.sync import sync_to_async
from django.urls import reverse
from django.utils import timezone

from elicitation.failures import PREFIX as PROVIDER_ERROR
from elicitation.failures import tool_error_text
from elicitation.form import ElicitationSchema, InvalidElicitationContent, InvalidElicitationSchema
from elicitation.models import Elicitation, ThirdPartyProvider
from elicitation.protocol import (
    REQUEST_ID_PREFIX,
    UrlElicitationRequired,
    describe,
    form_input_request,
    form_params,
    schema_digest,
    stored_answer,
    supports_form,
    supports_url,
    url_input_request,
)
from elicitation.providers import ProviderError, forget_rejected_connection, fresh_access_token
from elicitation.service import (
    close_answer,
    create_unsent_secret_request,
    create_url_elicitation,
    find_connection,
    get_secret,
    pending_url_request,
    set_status,
    take_unreported_failure,
    wait_for_outcome,
)
from elicitation.settings import elicitation_settings
from mcp_oauth.mcp_server.tools import McpError, ToolContext, ToolError
from mcp_oauth.mcp_server.transport.input_required import InputRound
from mcp_oauth.mcp_server.transport.request_state import InvalidRequestState
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.text import storable

__all__ = [
    "ConnectedAccount",
    "ElicitationError",
    "ElicitationTimeout",
    "ElicitationUnsupported",
    "FormResult",
    "InvalidElicitationContent",
    "InvalidElicitationSchema",
    "UrlElicitationRequired",
    "UrlElicitationUnsupported",
    "UrlResult",
    "elicit_form",
    "elicit_url",
    "reconnect",
    "require_connection",
    "require_secret",
    "supports_form",
    "supports_url",
]

logger = logging.getLogger("elicitation.url")

_ACTIONS = ("accept", "decline", "cancel")


class ElicitationError(ToolError):
    """The user could not be asked or did not answer; fails the tool call with its message."""


class ElicitationUnsupported(ElicitationError):
    """The client did not declare form-mode elicitation (or the call is not streamed)."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(
            message
            or "This tool needs to ask you a question, but your MCP client cannot ask questions "
            "(it did not declare the elicitation capability for forms)."
        )


class ElicitationTimeout(ElicitationError):
    """No answer within the timeout; the :class:`~elicitation.models.Elicitation` is ``expired``."""


class UrlElicitationUnsupported(ToolError):
    """The client cannot open links for the user (no ``elicitation.url``); the message says what to do."""


@dataclass(frozen=True)
class FormResult:
    """The user's answer: ``action`` is ``"accept"`` (``content`` is the validated dict),
    ``"decline"`` or ``"cancel"`` (``content`` is None)."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


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
    connection_id: int | None = None  # the stored ThirdPartyConnection (see :func:`reconnect`)

    def __repr__(self) -> str:  # never show the token
        return f"ConnectedAccount(provider={self.provider.slug!r}, account_label={self.account_label!r})"

    @property
    def authorization_header(self) -> str:
        return f"{self.token_type} {self.access_token}"


SECRET_NEEDED = "This tool needs a value you must type on this site's secure page."


def _user_of(ctx: ToolContext) -> Any:
    user = ctx.user
    if getattr(user, "pk", None) is None:
        raise ToolError("This tool needs a signed-in user (the token has none).")
    return user


def _unsupported(what: str) -> UrlElicitationUnsupported:
    connections = mcp_oauth_settings.absolute(reverse("elicitation:connections"))
    return UrlElicitationUnsupported(
        f"{what} Your MCP client cannot open a link for that (it did not declare URL-mode elicitation). "
        f"Sign in at {connections} to do it there, then try again."
    )


def _round(ctx: ToolContext) -> InputRound:
    if ctx.input_round is None:
        ctx.input_round = InputRound()
    return ctx.input_round


def _application_id(ctx: ToolContext) -> Any:
    """The pk of the OAuth client whose token makes this call (None without one): the pages name it."""
    return getattr(ctx.application, "pk", None)


def _request_id(ctx: ToolContext) -> str:
    return json.dumps(ctx.request_id)[:200]


async def _finish(row: Elicitation, status: str, *, content: dict | None = None, error: str = "") -> None:
    row.status = status
    row.content = content
    row.error = error[:500]
    row.completed_at = timezone.now()
    row.client_answer = None  # read (or never coming): no later answer is taken
    row.client_answered_at = row.client_answered_at or row.completed_at
    await row.asave(update_fields=["status", "content", "error", "completed_at", "client_answer", "client_answered_at"])


# --- form mode ---------------------------------------------------------------------------


async def elicit_form(
    ctx: ToolContext,
    message: str,
    schema: dict[str, Any] | ElicitationSchema,
    *,
    timeout: float = 300,
) -> FormResult:
    """Ask the user to fill in a form through their client and get the answer.

    2025-11-25 session: sends ``elicitation/create`` with ``{"mode": "form", "message",
    "requestedSchema"}`` (no ``mode`` before 2025-11-25) on the ``tools/call`` SSE stream and
    waits. 2026-07-28 request: ends this round with ``input_required`` (a form input request);
    the retry's answer is validated and returned (a missing or invalid answer is asked again).

    :param message: what to show the user (non-empty).
    :param schema: a form schema (:mod:`elicitation.form`) as a dict or an :class:`ElicitationSchema`.
    :param timeout: 2025-11-25: seconds to wait for the answer.
    :returns: :class:`FormResult`.
    :raises InvalidElicitationSchema: ``schema`` is not a form schema (a programming error, raised
        before anything is sent); ``ValueError`` for an empty ``message`` or a non-positive timeout.
    :raises ElicitationUnsupported: the client did not declare form mode (nothing is sent), or the
        2025-11-25 call is not streamed (WSGI / JSON response mode).
    :raises InvalidElicitationContent: (2025-11-25) the user accepted with content that does not
        match ``schema`` (the row becomes ``invalid``; the message names the fields).
    :raises ElicitationTimeout: (2025-11-25) no answer within ``timeout`` (the row becomes ``expired``).
    :raises ElicitationError: (2025-11-25) the client answered with a JSON-RPC error or a malformed
        result (the row becomes ``cancelled``).
    :raises InputRequired: (2026-07-28) not answered yet; the endpoint turns it into the result.
    """
    form = schema if isinstance(schema, ElicitationSchema) else ElicitationSchema(schema)
    if not isinstance(message, str) or not message.strip() or not storable(message):
        raise ValueError("elicit_form needs a non-empty message of storable text (no NUL)")
    if not (timeout > 0):
        raise ValueError("elicit_form needs a positive timeout")
    if not supports_form(ctx.client_capabilities):
        raise ElicitationUnsupported()
    if ctx.modern:
        return await _form_round(ctx, message, form)
    if not ctx.streaming:
        raise ElicitationUnsupported(
            "This tool needs to ask you a question, but this connection cannot carry one "
            "(the server answers without a stream)."
        )

    row = await Elicitation.objects.acreate(
        mode=Elicitation.Mode.FORM,
        message=message,
        requested_schema=form.schema,
        user=ctx.user if getattr(ctx.user, "pk", None) is not None else None,
        session=ctx.session,
        application_id=_application_id(ctx),
        request_id=_request_id(ctx),
        expires_at=timezone.now() + timedelta(seconds=timeout),
    )
    try:
        answer = await ctx.send_request(
            "elicitation/create",
            form_params(message, form.schema, ctx.protocol_version),
            timeout=timeout,
            request_id=REQUEST_ID_PREFIX + row.elicitation_id,
            poll=stored_answer(row.pk),
        )
    except TimeoutError:
        await _finish(row, Elicitation.Status.EXPIRED, error="no answer in time")
        raise ElicitationTimeout("You did not answer the question in time.") from None
    except McpError as exc:
        await _finish(row, Elicitation.Status.CANCELLED, error=f"client error {exc.code}: {exc.message}")
        raise ElicitationError("Your MCP client could not ask the question.") from None
    except asyncio.CancelledError:
        await asyncio.shield(_finish(row, Elicitation.Status.CANCELLED, error="tool call cancelled"))
        raise

    action = answer.get("action") if isinstance(answer, dict) else None
    if action == "decline":
        await _finish(row, Elicitation.Status.DECLINED)
        return FormResult("decline")
    if action == "cancel":
        await _finish(row, Elicitation.Status.CANCELLED)
        return FormResult("cancel")
    if action != "accept":
        await _finish(row, Elicitation.Status.CANCELLED, error="malformed answer: no valid action")
        raise ElicitationError("Your MCP client sent a malformed answer to the question.")
    try:
        content = form.validate(answer.get("content"))
    except InvalidElicitationContent as exc:
        await _finish(row, Elicitation.Status.INVALID, error=str(exc))
        raise
    await _finish(row, Elicitation.Status.ACCEPTED, content=content)
    return FormResult("accept", content)


async def _finish_pending(pk: Any, status: str, *, content: dict | None = None, error: str = "") -> None:
    """Record the answer to the form row a ``requestState`` named; the row leaves ``pending`` once,
    so a state replayed on any worker (whatever its cache) is refused here.

    :raises InvalidRequestState: -32602, the row was already answered (or is gone).
    """
    updated = await Elicitation.objects.filter(
        pk=pk, mode=Elicitation.Mode.FORM, status=Elicitation.Status.PENDING
    ).aupdate(status=status, content=content, error=error[:500], completed_at=timezone.now())
    if not updated:
        raise InvalidRequestState()


async def _form_round(ctx: ToolContext, message: str, form: ElicitationSchema) -> FormResult:
    """2026-07-28: the settled or just-answered form of this key, or ``input_required`` asking it."""
    rnd = _round(ctx)
    key = rnd.next_key()
    settled = rnd.settled(key)
    if isinstance(settled, dict) and settled.get("kind") == "form" and settled.get("action") in _ACTIONS:
        return FormResult(settled["action"], settled.get("content"))
    digest = schema_digest(form.schema)
    asked = rnd.asked(key)
    shown = message
    if isinstance(asked, dict) and asked.get("kind") == "form" and asked.get("schema") == digest:
        answer = rnd.response(key)
        action = answer.get("action") if isinstance(answer, dict) else None
        row_pk = asked.get("row")
        if action in ("decline", "cancel"):
            status = Elicitation.Status.DECLINED if action == "decline" else Elicitation.Status.CANCELLED
            await _finish_pending(row_pk, status)
            rnd.settle(key, {"kind": "form", "action": action})
            return FormResult(action)
        if action == "accept":
            try:
                content = form.validate(answer.get("content"))
            except InvalidElicitationContent as exc:
                await _finish_pending(row_pk, Elicitation.Status.INVALID, error=str(exc))
                shown = f"{message}\n\n({exc})"[:2000]
            else:
                await _finish_pending(row_pk, Elicitation.Status.ACCEPTED, content=content)
                rnd.settle(key, {"kind": "form", "action": "accept", "content": content})
                return FormResult("accept", content)
        elif answer is not None:
            await _finish_pending(row_pk, Elicitation.Status.CANCELLED, error="malformed answer: no valid action")
    row = await Elicitation.objects.acreate(
        mode=Elicitation.Mode.FORM,
        message=message,
        requested_schema=form.schema,
        user=ctx.user if getattr(ctx.user, "pk", None) is not None else None,
        session=None,
        application_id=_application_id(ctx),
        request_id=_request_id(ctx),
        expires_at=timezone.now() + timedelta(seconds=float(mcp_oauth_settings.REQUEST_STATE_TTL_SECONDS)),
    )
    raise rnd.ask(key, form_input_request(shown, form.schema), {"kind": "form", "row": row.pk, "schema": digest})


# --- URL mode ----------------------------------------------------------------------------


async def _url_round(ctx: ToolContext, user: Any, create: Callable[[], Awaitable[Elicitation]]) -> Elicitation:
    """2026-07-28: the URL elicitation of this key once it is finished (completed, declined,
    cancelled, or still pending after the bounded wait of a retry that had no answer), or
    ``input_required`` sending the user to its page.

    A retry whose client accepted while the row is still pending waits (the response is held
    open with SSE keepalives) up to ``ELICITATION["URL_RETRY_WAIT_SECONDS"]``; a row still pending
    then is asked again (same link, new state).
    """
    rnd = _round(ctx)
    key = rnd.next_key()
    asked = rnd.asked(key) or rnd.settled(key)
    if isinstance(asked, dict) and asked.get("kind") == "url" and isinstance(asked.get("eid"), str):
        row = (
            await Elicitation.objects.filter(elicitation_id=asked["eid"], mode=Elicitation.Mode.URL, user=user)
            .select_related("provider")
            .afirst()
        )
        if row is not None:
            answer = rnd.response(key)
            action = answer.get("action") if isinstance(answer, dict) else None
            if action in ("decline", "cancel") and row.status == Elicitation.Status.PENDING:
                await set_status(
                    row, Elicitation.Status.DECLINED if action == "decline" else Elicitation.Status.CANCELLED
                )
            elif row.status == Elicitation.Status.PENDING and action == "accept":
                row = (
                    await wait_for_outcome(
                        row.pk, float(elicitation_settings.URL_RETRY_WAIT_SECONDS), release_on_drain=True
                    )
                    or row
                )
            marker = {"kind": "url", "eid": row.elicitation_id}
            if row.status != Elicitation.Status.PENDING:
                rnd.settle(key, marker)
                return row
            if not row.is_expired:
                raise rnd.ask(key, url_input_request(row), marker)
    row = await create()
    raise rnd.ask(key, url_input_request(row), {"kind": "url", "eid": row.elicitation_id})


async def _account(provider_row: ThirdPartyProvider, connection: Any) -> ConnectedAccount | None:
    """The connection with a fresh token, or None when the provider refused the refresh (gone)."""
    try:
        token = await sync_to_async(fresh_access_token)(connection)  # ORM: the request's own thread
    except ProviderError as exc:
        raise ToolError(f"{provider_row.name} could not be reached to refresh your connection ({exc.error}).") from None
    if token is None:
        return None
    return ConnectedAccount(
        provider=provider_row,
        access_token=token,
        token_type=connection.token_type or "Bearer",
        scopes=tuple(connection.scope_list),
        account_label=connection.account_label,
        expires_at=connection.expires_at,
        connection_id=connection.pk,
    )


async def _find(user: Any, slug: str, wanted: list[str]) -> tuple[ThirdPartyProvider, ConnectedAccount | None]:
    provider_row, connection = await sync_to_async(find_connection)(user, slug, wanted)
    if provider_row is None:
        logger.error("require_connection: no enabled third-party provider %r (add it in the admin)", slug)
        raise ToolError(f"This site has no enabled third-party provider {slug[:50]!r}; ask its administrators.")
    account = await _account(provider_row, connection) if connection is not None else None
    return provider_row, account


async def reconnect(ctx: ToolContext, account: ConnectedAccount, *, message: str | None = None) -> ConnectedAccount:
    """The provider refused ``account``'s access token (its API answered 401: the user or the
    provider revoked it there): forget the stored connection (audit ``connection.revoked``,
    reason ``rejected``) and ask the user to connect again, exactly as :func:`require_connection`
    does without a connection (``-32042`` in a 2025-11-25 session, ``input_required`` in a
    2026-07-28 request, a tool error naming the connections page for other clients)::

        account = await require_connection(ctx, "github", ["repo"])
        response = call_api(account)
        if response.status == 401:
            account = await reconnect(ctx, account)
            response = call_api(account)

    :returns: a new connection, when the user connected again within this call (2026-07-28).
    :raises: as :func:`require_connection`.
    """
    await sync_to_async(forget_rejected_connection)(account.connection_id)
    return await require_connection(ctx, account.provider, account.scopes, message=message)


async def require_connection(
    ctx: ToolContext, provider: str | ThirdPartyProvider, scopes: Iterable[str] = (), *, message: str | None = None
) -> ConnectedAccount:
    """The user's live connection to ``provider`` covering ``scopes``, or send them to connect it.

    With a connection: its access token, refreshed first when it has expired (a refused refresh
    deletes the connection and counts as none). Without one, a ``connect`` elicitation is created
    for this user (and session) and:

    * 2025-11-25: :class:`UrlElicitationRequired` (``-32042``) ends the call; the user connects in
      the browser, the client gets ``notifications/elicitation/complete`` and retries the call.
    * 2026-07-28: ``input_required`` with the link; the client's retry waits for the flow (bounded)
      and then finds the connection.

    :param provider: a :class:`~elicitation.models.ThirdPartyProvider` or its ``slug``.
    :param scopes: scopes needed beyond the provider's default ones.
    :raises UrlElicitationRequired: (2025-11-25) no usable connection, and the client supports URL mode.
    :raises UrlElicitationUnsupported: no usable connection, and the client does not (a tool error
        naming the site's connections page); nothing is created.
    :raises ToolError: the provider could not be reached to refresh the token, ``provider`` is not
        an enabled provider of this site (logged as an error), (2026-07-28) the user declined,
        cancelled or did not finish in time, or the provider refused (``access_denied``) or broke
        (its code exchange failed) the connection: the error names why, e.g. "Connecting your
        GitHub account failed: GitHub refused the sign-in code when this site exchanged it
        (invalid_grant)." In 2025-11-25 the retry after the completion notification of such a
        failure gets this error once (the call after it asks again).
    """
    user = _user_of(ctx)
    slug = provider.slug if isinstance(provider, ThirdPartyProvider) else str(provider)
    wanted = list(dict.fromkeys(scopes))
    provider_row, account = await _find(user, slug, wanted)
    if account is not None:
        return account
    text = message or f"Connect your {provider_row.name} account to continue."
    if not supports_url(ctx.client_capabilities, ctx.protocol_version):
        raise _unsupported(f"This tool needs your {provider_row.name} account connected.")
    requested = " ".join(dict.fromkeys([*provider_row.scope_list, *wanted]))
    session = None if ctx.modern else ctx.session

    async def create() -> Elicitation:
        row = await sync_to_async(pending_url_request)(
            user,
            session,
            kind=Elicitation.Kind.CONNECT,
            provider=provider_row,
            scopes=requested,
            message=text,
            application_id=_application_id(ctx),
        )
        if row is None:
            row = await sync_to_async(create_url_elicitation)(
                user=user,
                session=session,
                message=text,
                kind=Elicitation.Kind.CONNECT,
                provider=provider_row,
                scopes=wanted,
                request_id=ctx.request_id,
                tool_name=ctx.tool_name,
                application=_application_id(ctx),
            )
        return row

    if not ctx.modern:
        told = await sync_to_async(take_unreported_failure)(user, session, provider_row)
        if told is not None:  # the retry after the completion notification of a failed connection
            raise ToolError(tool_error_text(provider_row.name, told.status, told.error))
        raise UrlElicitationRequired([await create()])
    row = await _url_round(ctx, user, create)
    if row.status == Elicitation.Status.COMPLETED:
        provider_row, account = await _find(user, slug, wanted)
        if account is not None:
            return account
    if row.status == Elicitation.Status.FAILED or (
        row.status == Elicitation.Status.DECLINED and row.error.startswith(PROVIDER_ERROR)
    ):
        raise ToolError(tool_error_text(provider_row.name, row.status, row.error))
    if row.status in (Elicitation.Status.DECLINED, Elicitation.Status.CANCELLED):
        raise ToolError(f"You did not connect your {provider_row.name} account.")
    raise ToolError(
        f"Your {provider_row.name} account is not connected yet; call the tool again once you have connected it."
    )


async def require_secret(ctx: ToolContext, name: str, message: str) -> str:
    """The value the user stored under ``name``, or send them to the secure input page (same
    protocol as :func:`require_connection`).

    :raises UrlElicitationRequired: (2025-11-25) no value yet, and the client supports URL mode.
    :raises UrlElicitationUnsupported: no value yet, and the client does not: nothing is sent to it;
        the request waits for the user on the connections page (``/elicitation/connections/``),
        bound to the user and to no session.
    :raises ToolError: (2026-07-28) the user cancelled or did not finish in time.
    """
    user = _user_of(ctx)
    value = await sync_to_async(get_secret)(user, name)
    if value is not None:
        return value
    if not supports_url(ctx.client_capabilities, ctx.protocol_version):
        # The client cannot be given the link; the user finds the request on the connections
        # page instead (no session: nothing is ever sent to this client about it).
        await sync_to_async(create_unsent_secret_request)(user, name, message)
        raise _unsupported(SECRET_NEEDED)
    if not ctx.modern:
        row = await sync_to_async(create_url_elicitation)(
            user=user,
            session=ctx.session,
            message=message,
            kind=Elicitation.Kind.SECRET,
            secret_name=name,
            request_id=ctx.request_id,
            tool_name=ctx.tool_name,
            application=_application_id(ctx),
        )
        raise UrlElicitationRequired([row])

    async def create() -> Elicitation:
        row = await sync_to_async(pending_url_request)(
            user, None, kind=Elicitation.Kind.SECRET, secret_name=name, application_id=_application_id(ctx)
        )
        if row is None:
            row = await sync_to_async(create_url_elicitation)(
                user=user,
                session=None,
                message=message,
                kind=Elicitation.Kind.SECRET,
                secret_name=name,
                request_id=ctx.request_id,
                tool_name=ctx.tool_name,
                application=_application_id(ctx),
            )
        return row

    row = await _url_round(ctx, user, create)
    if row.status == Elicitation.Status.COMPLETED:
        value = await sync_to_async(get_secret)(user, name)
        if value is not None:
            return value
    if row.status in (Elicitation.Status.DECLINED, Elicitation.Status.CANCELLED):
        raise ToolError("You did not enter the value on the secure page.")
    raise ToolError("The value was not entered yet; call the tool again once you have saved it on the secure page.")


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
    answer_timeout: float | None = None,
) -> UrlResult:
    """Send the user to a page of this site during the call, and (by default) wait until they finish.

    2025-11-25: ``elicitation/create`` with ``mode: "url"`` on the ``tools/call`` stream, then
    waits for the row. 2026-07-28: ``input_required`` with a URL input request; the retry waits
    (bounded by ``ELICITATION["URL_RETRY_WAIT_SECONDS"]``) for the row.

    :param kind: / provider / scopes / secret_name / target_url: as
        :func:`~elicitation.service.create_url_elicitation`.
    :param wait_seconds: (2025-11-25) after the client accepts, how long to wait for the interaction
        to finish (None: do not wait; ``completed`` is then False).
    :param answer_timeout: (2025-11-25) how long to wait for the client's accept / decline / cancel
        (seconds; None: ``ELICITATION["URL_ANSWER_TIMEOUT_SECONDS"]``). The answer counts wherever
        it arrives and whenever: also after the user already finished the page on another worker.
    :returns: :class:`UrlResult`.
    :raises UrlElicitationUnsupported: the client did not declare URL mode: nothing is sent to it
        (for ``kind="secret"`` the request waits for the user on the connections page, unbound to
        any session; otherwise nothing is created).
    :raises ElicitationUnsupported: the 2025-11-25 call is not streamed.
    :raises ElicitationTimeout: no answer from the client in time (the row expires).
    :raises ElicitationError: the client answered with an error or a malformed result.
    """
    user = _user_of(ctx)
    if not supports_url(ctx.client_capabilities, ctx.protocol_version):
        if kind == Elicitation.Kind.SECRET and secret_name:
            await sync_to_async(create_unsent_secret_request)(user, secret_name, message)
            raise _unsupported(SECRET_NEEDED)
        raise _unsupported("This tool needs you to open a page on this site.")
    create_row = partial(
        sync_to_async(create_url_elicitation),
        user=user,
        message=message,
        kind=kind,
        provider=provider,
        scopes=scopes,
        secret_name=secret_name,
        target_url=target_url,
        request_id=ctx.request_id,
        tool_name=ctx.tool_name,
        application=_application_id(ctx),
    )
    if ctx.modern:
        row = await _url_round(ctx, user, partial(create_row, session=None))
        if row.status == Elicitation.Status.DECLINED:
            return UrlResult("decline", False, row)
        if row.status == Elicitation.Status.CANCELLED:
            return UrlResult("cancel", False, row)
        return UrlResult("accept", row.status == Elicitation.Status.COMPLETED, row)
    if not ctx.streaming:
        raise ElicitationUnsupported("This tool needs to show you a link, but this connection cannot carry one.")
    row = await create_row(session=ctx.session)
    try:
        # The answer may reach another worker, before or after the user finished the page
        # there: it is recorded on the row whatever its status (signals.record_client_answer).
        answer = await ctx.send_request(
            "elicitation/create",
            describe(row),
            timeout=float(
                elicitation_settings.URL_ANSWER_TIMEOUT_SECONDS if answer_timeout is None else answer_timeout
            ),
            request_id=REQUEST_ID_PREFIX + row.elicitation_id,
            poll=stored_answer(row.pk),
        )
    except TimeoutError:
        await set_status(row, Elicitation.Status.EXPIRED, "no answer in time")
        raise ElicitationTimeout("Your MCP client did not show the link in time.") from None
    except McpError as exc:
        await set_status(row, Elicitation.Status.CANCELLED, f"client error {exc.code}: {exc.message}")
        raise ElicitationError("Your MCP client could not show the link.") from None
    except asyncio.CancelledError:
        await asyncio.shield(set_status(row, Elicitation.Status.CANCELLED, "tool call cancelled"))
        raise
    finally:
        await asyncio.shield(close_answer(row.pk))
    action = answer.get("action")
    if action in ("decline", "cancel"):
        status = Elicitation.Status.DECLINED if action == "decline" else Elicitation.Status.CANCELLED
        await set_status(row, status)
        return UrlResult(action, False, row)
    if action != "accept":
        await set_status(row, Elicitation.Status.CANCELLED, "malformed answer: no valid action")
        raise ElicitationError("Your MCP client sent a malformed answer.")
    if wait_seconds is None:
        return UrlResult("accept", False, row)
    row = await wait_for_outcome(row.pk, float(wait_seconds)) or row
    return UrlResult("accept", row.status == Elicitation.Status.COMPLETED, row)
