"""The URL-mode helpers tools call (SEP-1036; MCP 2025-11-25 / 2026-07-28 "Elicitation" / "URL Mode"):
:func:`require_connection`, :func:`reconnect`, :func:`require_secret`, :func:`elicit_url`.
Public through :mod:`elicitation.api` (import them from there)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async

from elicitation.failures import PREFIX as PROVIDER_ERROR
from elicitation.failures import tool_error_text
from elicitation.models import Elicitation, ThirdPartyProvider
from elicitation.protocol import (
    REQUEST_ID_PREFIX,
    UrlElicitationRequired,
    describe,
    stored_answer,
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
from elicitation.tool_support import (
    SECRET_NEEDED,
    ConnectedAccount,
    ElicitationError,
    ElicitationTimeout,
    ElicitationUnsupported,
    UrlResult,
    _application_id,
    _round,
    _unsupported,
    _user_of,
    logger,
)
from mcp_oauth.mcp_server.tools import McpError, ToolContext, ToolError

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
            await Elicitation.objects.filter(
                elicitation_id=asked["eid"],
                mode=Elicitation.Mode.URL,
                user=user,
                organization=getattr(ctx, "organization", None),
            )
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


async def _find(
    user: Any, slug: str, wanted: list[str], organization: Any = None
) -> tuple[ThirdPartyProvider, ConnectedAccount | None]:
    provider_row, connection = await sync_to_async(find_connection)(
        user, slug, wanted, getattr(organization, "pk", None)
    )
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
    provider_row, account = await _find(user, slug, wanted, getattr(ctx, "organization", None))
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
            organization=getattr(ctx, "organization", None),
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
                organization=getattr(ctx, "organization", None),
            )
        return row

    if not ctx.modern:
        told = await sync_to_async(take_unreported_failure)(user, session, provider_row)
        if told is not None:  # the retry after the completion notification of a failed connection
            raise ToolError(tool_error_text(provider_row.name, told.status, told.error))
        raise UrlElicitationRequired([await create()])
    row = await _url_round(ctx, user, create)
    if row.status == Elicitation.Status.COMPLETED:
        provider_row, account = await _find(user, slug, wanted, getattr(ctx, "organization", None))
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
            organization=getattr(ctx, "organization", None),
        )
        raise UrlElicitationRequired([row])

    async def create() -> Elicitation:
        row = await sync_to_async(pending_url_request)(
            user,
            None,
            kind=Elicitation.Kind.SECRET,
            secret_name=name,
            application_id=_application_id(ctx),
            organization=getattr(ctx, "organization", None),
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
                organization=getattr(ctx, "organization", None),
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
        organization=getattr(ctx, "organization", None),
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
