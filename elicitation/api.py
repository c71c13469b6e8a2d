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
from datetime import timedelta
from typing import Any

from django.utils import timezone

from elicitation.form import ElicitationSchema, InvalidElicitationContent, InvalidElicitationSchema
from elicitation.models import Elicitation
from elicitation.protocol import (
    REQUEST_ID_PREFIX,
    UrlElicitationRequired,
    form_input_request,
    form_params,
    schema_digest,
    stored_answer,
    supports_form,
    supports_url,
)
from elicitation.tool_support import (
    _ACTIONS,
    ConnectedAccount,
    ElicitationError,
    ElicitationTimeout,
    ElicitationUnsupported,
    FormResult,
    UrlElicitationUnsupported,
    UrlResult,
    _application_id,
    _finish,
    _request_id,
    _round,
)
from elicitation.url_helpers import elicit_url, reconnect, require_connection, require_secret
from mcp_oauth.mcp_server.tools import McpError, ToolContext
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
        organization=getattr(ctx, "organization", None),
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
        organization=getattr(ctx, "organization", None),
        request_id=_request_id(ctx),
        expires_at=timezone.now() + timedelta(seconds=float(mcp_oauth_settings.REQUEST_STATE_TTL_SECONDS)),
    )
    raise rnd.ask(key, form_input_request(shown, form.schema), {"kind": "form", "row": row.pk, "schema": digest})
