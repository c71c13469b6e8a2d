"""Observers of the MCP endpoint: one hook around every JSON-RPC request, in both eras.

:meth:`~.table.MethodTable.serve` is where every request of the endpoint runs (the Django view,
the ASGI lanes, the legacy SSE channel). When observers are installed it calls, for each request,
``token = observer.start(call)`` before the handler and ``observer.finish(token, event)`` after
it, with an :class:`McpRequestEvent`. With none installed (the default) the cost is one truth test
of an empty tuple.

Observers are installed once at start-up by the composition module (:mod:`mcp_oauth.wiring`) with
:func:`add_observer`; tracing, metrics and the tool-call audit trail are observers. An observer must
not raise: a failure is logged and the request goes on.

``start`` runs on the event loop before the handler (a tracing observer opens its span there, so
the handler's own spans are its children); ``finish`` runs after the response message is built
and must not block (queue, don't write).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from mcp_oauth.mcp_server.transport.table import Call

__all__ = ["McpRequestEvent", "Observer", "Outcome", "add_observer", "installed", "remove_observer"]

logger = logging.getLogger(__name__)

#: ``ok``: a result; ``tool_error``: a ``tools/call`` result with ``isError`` true; ``error``: a
#: JSON-RPC error (``error_code``); ``denied``: the token lacks a scope (HTTP 403 step-up);
#: ``input_required``: a modern result asking the client for input (``resultType``).
Outcome = Literal["ok", "tool_error", "error", "denied", "input_required"]


@dataclass(slots=True)
class McpRequestEvent:
    """What happened to one JSON-RPC request.

    :param call: the :class:`~.table.Call` served (method, params, principal, era, session ...).
    :param target: the tool or prompt name (``params.name``) or resource URI (``params.uri``) of the
        methods that name one (``Method.name_param``), else None.
    :param outcome: see :data:`Outcome`.
    :param error_code: the JSON-RPC error code when ``outcome`` is ``error``, else None.
    :param duration: seconds from ``start`` to ``finish`` (monotonic clock).
    :param started_at: UNIX time (seconds) at ``start``.
    :param message: the JSON-RPC response message sent (None for ``denied``).
    :param status: the HTTP status the front end answers (403 for ``denied``).
    """

    call: Call
    target: str | None
    outcome: Outcome
    error_code: int | None
    duration: float
    started_at: float
    message: dict[str, Any] | None
    status: int


class Observer(Protocol):
    def start(self, call: Call) -> Any: ...

    def finish(self, token: Any, event: McpRequestEvent) -> None: ...


_observers: tuple[Observer, ...] = ()


def installed() -> tuple[Observer, ...]:
    """The installed observers, in installation order (an empty tuple when none)."""
    return _observers


def add_observer(observer: Observer) -> None:
    """Install ``observer`` (idempotent: the same object twice is installed once)."""
    global _observers
    if observer not in _observers:
        _observers = (*_observers, observer)


def remove_observer(observer: Observer) -> None:
    """Uninstall ``observer`` (no error when it is not installed)."""
    global _observers
    _observers = tuple(o for o in _observers if o is not observer)
