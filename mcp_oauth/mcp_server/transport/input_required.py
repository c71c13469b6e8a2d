"""Multi-round-trip requests (MCP 2026-07-28 "Multi round-trip requests", SEP-2322 "MRTR").

In a 2026-07-28 request the server cannot ask the client anything while a tool runs. A tool
helper that needs the user (``elicitation.api.elicit_form``, ``require_connection``, …) raises
:class:`InputRequired` instead; ``tools/call`` answers::

    {"resultType": "input_required",
     "inputRequests": {"<key>": {"method": "elicitation/create", "params": {...}}},
     "requestState": "<sealed>"}

and the client retries the same call (new JSON-RPC id, same name and arguments) with
``inputResponses: {"<key>": <ElicitResult>}`` and the ``requestState`` echoed. The tool body
runs again from its start.

A tool, prompt renderer or resource reader asks with ``ctx.request_inputs({key: InputRequest})``
(several inputs in one round, keys chosen by the caller; :func:`resolve_inputs`); a second call
later in the body makes a second round. ``ctx.request_input(method, params)`` is the one-input
case under a generated key. The elicitation helpers (``elicit_form``, ``require_connection``, …)
take generated keys too: each helper call gets the next key of :meth:`InputRound.next_key`
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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
import mcp_types as types
from pydantic import TypeAdapter, ValidationError

from mcp_oauth.mcp_server.transport.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY, McpError

__all__ = ["InputRequest", "InputRequired", "InputRound", "resolve_inputs"]

#: Client capability each input request method needs (MCP 2026-07-28: never ask what was not declared).
CAPABILITY_OF: dict[str, str] = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}
#: The result model a client answers each input request method with.
_ANSWER_OF: dict[str, TypeAdapter] = {
    "elicitation/create": TypeAdapter(types.ElicitResult),
    "sampling/createMessage": TypeAdapter(types.CreateMessageResult | types.CreateMessageResultWithTools),
    "roots/list": TypeAdapter(types.ListRootsResult),
}
#: Longest caller-chosen input key.
MAX_KEY_CHARS = 128

#: Longest key we use; keys the client sends back are only ever looked up, never stored.
KEY_PREFIX = "input-"


@dataclass(frozen=True)
class InputRequest:
    """One thing to ask the client (an entry of ``inputRequests``; MCP 2026-07-28 ``InputRequest``).

    :param method: ``"elicitation/create"``, ``"sampling/createMessage"`` or ``"roots/list"``.
    :param params: the request's ``params`` (wire shape, JSON), or None.

    Build them with :meth:`elicit`, :meth:`sample` and :meth:`roots`, or directly.
    """

    method: str
    params: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.method not in CAPABILITY_OF:
            raise ValueError(f"cannot ask the client {self.method!r}; use one of {', '.join(CAPABILITY_OF)}")

    @classmethod
    def elicit(cls, message: str, requested_schema: dict[str, Any]) -> InputRequest:
        """A form-mode ``elicitation/create`` (``requested_schema``: a flat JSON Schema object)."""
        return cls("elicitation/create", {"mode": "form", "message": message, "requestedSchema": requested_schema})

    @classmethod
    def sample(cls, messages: list[dict[str, Any]], max_tokens: int, **extra: Any) -> InputRequest:
        """A ``sampling/createMessage`` (``messages``: ``SamplingMessage`` dicts; ``extra``: other
        params in wire spelling, e.g. ``systemPrompt``)."""
        return cls("sampling/createMessage", {"messages": messages, "maxTokens": max_tokens, **extra})

    @classmethod
    def roots(cls) -> InputRequest:
        """A ``roots/list``."""
        return cls("roots/list", {})

    @property
    def capability(self) -> str:
        """The client capability this request needs (``elicitation``, ``sampling``, ``roots``)."""
        return CAPABILITY_OF[self.method]

    def wire(self) -> dict[str, Any]:
        """The ``inputRequests`` entry: ``{"method", "params"}``."""
        entry: dict[str, Any] = {"method": self.method}
        if self.params is not None:
            entry["params"] = self.params
        return entry

    def accepts(self, answer: Any) -> bool:
        """True when ``answer`` is a well-formed result of :attr:`method` (``ElicitResult``,
        ``CreateMessageResult``, ``ListRootsResult``); an accepted form must also match its
        ``requestedSchema`` (JSON Schema)."""
        if not isinstance(answer, dict):
            return False
        try:
            _ANSWER_OF[self.method].validate_python(answer, by_name=False)
        except ValidationError:
            return False
        if self.method == "elicitation/create" and answer.get("action") == "accept":
            schema = (self.params or {}).get("requestedSchema")
            if isinstance(schema, dict):
                try:
                    jsonschema.validate(answer.get("content") or {}, schema)
                except (jsonschema.ValidationError, jsonschema.SchemaError):
                    return False
        return True


def check_input_keys(requests: Mapping[str, Any]) -> None:
    """:raises ValueError: an empty request map, or a key that is not a 1-128 character string."""
    if not requests:
        raise ValueError("request_inputs needs at least one input request")
    for key in requests:
        if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
            raise ValueError(f"input keys are 1-{MAX_KEY_CHARS} character strings, not {key!r}")


def resolve_inputs(
    input_round: InputRound, requests: Mapping[str, InputRequest], capabilities: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """The answers to every request of ``requests`` in this round of a 2026-07-28 request.

    A key's answer is the value an earlier round settled, else the client's ``inputResponses``
    entry under that key when :meth:`InputRequest.accepts` it (the answer is then settled, i.e.
    sealed into the next ``requestState``). Keys without an answer are asked (again) together:
    a missing, malformed or schema-violating answer is asked again, never an error. Answers under
    keys not in ``requests`` are ignored.

    An ``inputResponses`` answer counts whether or not a previous round sent the request (the
    client may answer up front, as an ephemeral flow does): these are the client's own answers,
    which a genuine round could not vouch for either. What the server itself remembers (settled
    answers, the rows a URL or form elicitation names) only ever comes from the sealed state.

    :raises McpError: -32021 (``data.requiredCapabilities``) when a request needs a client
        capability the request's ``_meta`` does not declare (nothing is asked).
    :raises InputRequired: some keys are not answered yet.
    """
    lacking = sorted({r.capability for r in requests.values() if not isinstance(capabilities.get(r.capability), dict)})
    if lacking:
        raise McpError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"This request needs the client capabilities: {', '.join(lacking)}",
            {"requiredCapabilities": {name: {} for name in lacking}},
        )
    answers: dict[str, dict[str, Any]] = {}
    pending: dict[str, InputRequest] = {}
    for key, request in requests.items():
        settled = input_round.settled(key)
        if isinstance(settled, dict) and settled.get("kind") == "raw" and settled.get("method") == request.method:
            answers[key] = dict(settled.get("result") or {})
            continue
        answer = input_round.offered(key)
        if request.accepts(answer):
            input_round.settle(key, {"kind": "raw", "method": request.method, "result": answer})
            answers[key] = answer
            continue
        pending[key] = request
    if pending:
        raise InputRequired(
            {key: request.wire() for key, request in pending.items()},
            {key: {"kind": "raw", "method": request.method} for key, request in pending.items()},
        )
    return answers


def as_input_request(value: InputRequest | Mapping[str, Any]) -> InputRequest:
    """``value`` as an :class:`InputRequest` (a ``{"method", "params"}`` dict is accepted).

    :raises ValueError: an unknown method.
    """
    if isinstance(value, InputRequest):
        return value
    if isinstance(value, Mapping):
        params = value.get("params")
        return InputRequest(str(value.get("method")), dict(params) if isinstance(params, Mapping) else None)
    raise ValueError(f"an input request is an InputRequest or a dict, not {type(value).__name__}")


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

    def offered(self, key: str) -> Any:
        """The client's ``inputResponses`` entry under ``key``, asked or not (see :func:`resolve_inputs`)."""
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
