"""The tool-facing elicitation API (MCP 2025-11-25 "Client Features / Elicitation", form mode).

::

    from elicitation.api import elicit_form
    from elicitation.form import ElicitationSchema

    CITY = ElicitationSchema({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})

    @tool(scopes=["mcp"])
    async def weather(ctx: ToolContext) -> str:
        answer = await elicit_form(ctx, "Which city?", CITY)
        if answer.action != "accept":
            return "No city, no weather."
        return forecast(answer.content["city"])

The request travels on the ``tools/call`` response stream (the endpoint must run
under ASGI). Every request is logged as an :class:`~elicitation.models.Elicitation`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from django.utils import timezone

from mcp_oauth.text import storable
from mcp_oauth.tools import McpError, ToolContext, ToolError

from .form import ElicitationSchema, InvalidElicitationContent, InvalidElicitationSchema
from .models import Elicitation
from .url import REQUEST_ID_PREFIX, _stored_answer

__all__ = [
    "ElicitationError",
    "ElicitationTimeout",
    "ElicitationUnsupported",
    "FormResult",
    "InvalidElicitationContent",
    "InvalidElicitationSchema",
    "elicit_form",
    "supports_form",
]

#: Protocol revisions whose ``elicitation/create`` carries ``mode`` (SEP-1036); older ones have no modes.
_FIRST_REVISION_WITH_MODES = "2025-11-25"


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


@dataclass(frozen=True)
class FormResult:
    """The user's answer: ``action`` is ``"accept"`` (``content`` is the validated dict),
    ``"decline"`` or ``"cancel"`` (``content`` is None)."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


def supports_form(capabilities: Mapping[str, Any] | None) -> bool:
    """Whether client ``capabilities`` (from ``initialize``) allow form-mode elicitation.

    MCP 2025-11-25 / SEP-1036 "Capabilities": ``"elicitation": {}`` means form only
    (the 2025-06-18 declaration), ``{"form": {}, ...}`` declares form mode;
    ``{"url": {}}`` alone, or no ``elicitation``, does not allow forms.
    """
    if not isinstance(capabilities, Mapping):
        return False
    declared = capabilities.get("elicitation")
    if not isinstance(declared, Mapping):
        return False
    return not declared or isinstance(declared.get("form"), Mapping)


async def _finish(row: Elicitation, status: str, *, content: dict | None = None, error: str = "") -> None:
    row.status = status
    row.content = content
    row.error = error[:500]
    row.completed_at = timezone.now()
    row.client_answer = None
    await row.asave(update_fields=["status", "content", "error", "completed_at", "client_answer"])


async def elicit_form(
    ctx: ToolContext,
    message: str,
    schema: dict[str, Any] | ElicitationSchema,
    *,
    timeout: float = 300,
) -> FormResult:
    """Ask the user to fill in a form through their client and wait for the answer.

    Sends ``elicitation/create`` with ``{"mode": "form", "message", "requestedSchema"}``
    (no ``mode`` to clients that negotiated a revision older than 2025-11-25), on the
    ``tools/call`` SSE stream, and validates an accepted answer against ``schema``.

    :param message: what to show the user (non-empty).
    :param schema: a form schema (:mod:`elicitation.form`) as a dict or an :class:`ElicitationSchema`.
    :param timeout: seconds to wait for the answer.
    :returns: :class:`FormResult`.
    :raises InvalidElicitationSchema: ``schema`` is not a form schema (a programming error, raised
        before anything is sent); ``ValueError`` for an empty ``message`` or a non-positive timeout.
    :raises ElicitationUnsupported: the client did not declare form mode (nothing is sent), or the
        call is not streamed (WSGI / JSON response mode).
    :raises InvalidElicitationContent: the user accepted with content that does not match
        ``schema`` (the row becomes ``invalid``; the message names the fields). The tool is not
        re-asked: a client that sends bad content once would likely do it again.
    :raises ElicitationTimeout: no answer within ``timeout`` (the row becomes ``expired``).
    :raises ElicitationError: the client answered with a JSON-RPC error or a malformed result
        (the row becomes ``cancelled``).
    """
    form = schema if isinstance(schema, ElicitationSchema) else ElicitationSchema(schema)
    if not isinstance(message, str) or not message.strip() or not storable(message):
        raise ValueError("elicit_form needs a non-empty message of storable text (no NUL)")
    if not (timeout > 0):
        raise ValueError("elicit_form needs a positive timeout")
    if not supports_form(ctx.client_capabilities):
        raise ElicitationUnsupported()
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
        request_id=json.dumps(ctx.request_id)[:200],
        expires_at=timezone.now() + timedelta(seconds=timeout),
    )
    params: dict[str, Any] = {"mode": "form", "message": message, "requestedSchema": form.schema}
    if str(ctx.protocol_version) < _FIRST_REVISION_WITH_MODES:
        del params["mode"]

    try:
        answer = await ctx.send_request(
            "elicitation/create",
            params,
            timeout=timeout,
            request_id=REQUEST_ID_PREFIX + row.elicitation_id,
            poll=_stored_answer(row.pk),
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
