"""What the tool-facing elicitation helpers share (:mod:`elicitation.api`, :mod:`elicitation.url_helpers`):
their errors and results, and reading the user, client and input round of a tool call."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from django.urls import reverse
from django.utils import timezone

from elicitation.models import Elicitation, ThirdPartyProvider
from mcp_oauth.mcp_server.tools import ToolContext, ToolError
from mcp_oauth.mcp_server.transport.input_required import InputRound
from mcp_oauth.settings import mcp_oauth_settings

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
