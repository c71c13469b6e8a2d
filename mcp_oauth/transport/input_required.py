"""Multi-round-trip requests (MCP 2026-07-28 "Multi round-trip requests", SEP-2322 "MRTR").

In a 2026-07-28 request the server cannot ask the client anything while a tool runs. A tool
helper that needs the user (``elicitation.api.elicit_form``, ``require_connection``, …) raises
:class:`InputRequired` instead; ``tools/call`` answers::

    {"resultType": "input_required",
     "inputRequests": {"<key>": {"method": "elicitation/create", "params": {...}}},
     "requestState": "<sealed>"}

and the client retries the same call (new JSON-RPC id, same name and arguments) with
``inputResponses: {"<key>": <ElicitResult>}`` and the ``requestState`` echoed. The tool body
runs again from its start; each helper call gets the next key of :meth:`InputRound.next_key`
(the same key in every round, as long as the body asks in the same order), finds its answer
(:meth:`InputRound.response`) or the value an earlier round settled (:meth:`InputRound.settled`)
and goes on.

The sealed state (:mod:`.request_state`) carries ``asked`` (key -> what the server asked, e.g. the
elicitation row it named) and ``settled`` (key -> answers accepted in earlier rounds); only keys
the state says were asked are read from ``inputResponses`` (the client cannot inject answers).

A handler of another method that may need input (``prompts/get``, ``resources/read``) does what
``tools/call`` does (:mod:`.tool_methods`)::

    input_round, binding = request_state.open_round(call, name, arguments)   # -32602 on a bad state
    try:
        ...  # code that may raise InputRequired (e.g. through input_round.ask(...))
    except InputRequired as needed:
        return request_state.input_required_result(binding, needed, input_round)
"""

from __future__ import annotations

from typing import Any

__all__ = ["InputRequired", "InputRound"]

#: Longest key we use; keys the client sends back are only ever looked up, never stored.
KEY_PREFIX = "input-"


class InputRequired(Exception):
    """End this round of a modern ``tools/call`` with ``resultType: "input_required"``.

    :param requests: ``inputRequests`` to send: key -> ``{"method": "elicitation/create", "params": {...}}``
        (an empty dict: a state-only round, the client retries at once).
    :param asked: key -> JSON object sealed into ``requestState`` and handed back by
        :meth:`InputRound.asked` in the next round (e.g. ``{"kind": "form", "elicitation": id}``).
    """

    def __init__(self, requests: dict[str, dict[str, Any]], asked: dict[str, dict[str, Any]]) -> None:
        super().__init__("input required")
        self.requests = requests
        self.asked = asked


class InputRound:
    """The multi-round-trip state of one modern ``tools/call``.

    :param asked: from the verified ``requestState``: what the previous round asked.
    :param responses: the client's ``inputResponses`` (only keys in ``asked`` are ever read).
    :param settled: from the verified ``requestState``: answers earlier rounds accepted.
    :param state_id: the id of the verified state (None on a first call).
    """

    def __init__(
        self,
        asked: dict[str, dict[str, Any]] | None = None,
        responses: dict[str, Any] | None = None,
        settled: dict[str, Any] | None = None,
        state_id: str | None = None,
    ) -> None:
        self._asked = dict(asked or {})
        self._responses = dict(responses or {}) if isinstance(responses, dict) else {}
        self._settled = dict(settled or {})
        self.state_id = state_id
        self._counter = 0

    def next_key(self) -> str:
        """The key of the next input this tool body asks for (``input-1``, ``input-2``, …)."""
        self._counter += 1
        return f"{KEY_PREFIX}{self._counter}"

    def asked(self, key: str) -> dict[str, Any] | None:
        """What the previous round asked under ``key`` (its sealed ``asked`` entry), or None."""
        return self._asked.get(key)

    def response(self, key: str) -> Any:
        """The client's answer to ``key`` when the previous round asked it; else None."""
        if key not in self._asked:
            return None
        return self._responses.get(key)

    def settled(self, key: str) -> Any:
        """The value an earlier round settled for ``key`` (see :meth:`settle`), or None."""
        return self._settled.get(key)

    def settle(self, key: str, value: Any) -> None:
        """Remember ``value`` (JSON) as the answer of ``key`` for the rounds that follow."""
        self._settled[key] = value

    @property
    def settled_values(self) -> dict[str, Any]:
        return dict(self._settled)

    def ask(self, key: str, request: dict[str, Any] | None, asked: dict[str, Any]) -> InputRequired:
        """The :class:`InputRequired` that asks ``request`` under ``key`` (None: state-only round)."""
        return InputRequired({key: request} if request is not None else {}, {key: asked})
