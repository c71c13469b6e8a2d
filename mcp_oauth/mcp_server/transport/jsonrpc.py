"""JSON-RPC 2.0 framing for the MCP endpoint (MCP 2025-11-25 "Base Protocol" / "Messages").

What arrives in a POST body is parsed by :func:`parse_message` into one
:class:`Incoming` (a request, a notification, or a response/error the client
sends back to a server-to-client request), or rejected with a
:class:`JsonRpcError` that carries the JSON-RPC error code *and* the HTTP status
to answer with:

=====================================  ========  ===========
condition                              code      HTTP status
=====================================  ========  ===========
not UTF-8 JSON, NaN/Infinity, too deep -32700    400
not a JSON-RPC 2.0 object, a batch     -32600    400
unknown method                         -32601    200
invalid params                         -32602    200
unsupported ``MCP-Protocol-Version``   -32022    400
=====================================  ========  ===========

Batches (JSON arrays) were removed from MCP in 2025-06-18 and are refused.
Responses are plain dicts built by :func:`result_message` / :func:`error_message`
and encoded by :func:`dumps` (ASCII-escaped, so no client string can break the
encoding of a response).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp_types import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    URL_ELICITATION_REQUIRED,
)

from mcp_oauth.shared.strict_json import finite_float, reject_constant
from mcp_oauth.shared.text import storable

__all__ = [
    "HEADER_MISMATCH",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "URL_ELICITATION_REQUIRED",
    "Incoming",
    "JsonRpcError",
    "McpError",
    "dumps",
    "error_message",
    "is_valid_id",
    "parse_message",
    "result_message",
]

#: The request was cancelled by a ``notifications/cancelled`` before it completed
#: (answered only when an HTTP response is still owed, i.e. in JSON mode).
REQUEST_CANCELLED = -32800

#: Largest absolute integer accepted as a request id (JSON-RPC ids are echoed
#: back; clients in other languages cannot represent larger ones).
MAX_INT_ID = 2**63 - 1
#: Longest string request id accepted.
MAX_STR_ID = 1024

RequestId = int | str


class McpError(Exception):
    """Raise from a tool (or any handler) to answer with a JSON-RPC error instead of a result.

    ``McpError(code, message, data=None)``; e.g. the elicitation app raises it with
    ``-32042`` (URLElicitationRequired, MCP 2025-11-25 "Elicitation"). Ordinary tool
    failures should not use it: they become a ``CallToolResult`` with ``isError: true``
    (MCP 2025-11-25 "Tools" / "Error Handling").
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = str(message)
        self.data = data

    def to_error(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member: ``{"code", "message"[, "data"]}``."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class JsonRpcError(McpError):
    """A protocol error the endpoint answers itself; ``http_status`` is the HTTP status to use.

    ``request_id`` is echoed in the error response when it could be read (else ``null``).
    """

    def __init__(
        self,
        code: int,
        message: str,
        *,
        data: Any = None,
        http_status: int = 200,
        request_id: RequestId | None = None,
    ) -> None:
        super().__init__(code, message, data)
        self.http_status = http_status
        self.request_id = request_id


@dataclass(frozen=True)
class Incoming:
    """One parsed client message.

    ``kind`` is ``"request"`` (has ``id`` and ``method``), ``"notification"``
    (``method`` without ``id``) or ``"response"`` (``id`` with ``result`` or
    ``error``: the client answering a server-to-client request). ``params`` is
    always a dict (``{}`` when absent).
    """

    kind: Literal["request", "notification", "response"]
    raw: dict[str, Any]
    method: str | None = None
    id: RequestId | None = None
    params: dict[str, Any] = field(default_factory=dict)


def is_valid_id(value: Any) -> bool:
    """Whether ``value`` is an MCP request id: a string, or an integer (not a bool), never null."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -MAX_INT_ID <= value <= MAX_INT_ID
    # A string id is echoed in the response: text a client's JSON parser reads (no lone surrogate, RFC 8259 §8.2).
    return isinstance(value, str) and len(value) <= MAX_STR_ID and storable(value)


class _RepeatedMember(ValueError):
    """A JSON object of the body names a member twice."""


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: refuse a repeated member name (RFC 8259 §4) instead of keeping the last."""
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _RepeatedMember
    return result


def strict_loads(body: bytes) -> Any:
    """``body`` parsed as the MCP endpoint parses it: UTF-8 (no other encoding, no BOM), no member
    name repeated in one object, no ``NaN``/``Infinity`` nor a number overflowing to infinity.

    :raises ValueError: the body is not such JSON (``UnicodeDecodeError`` included).
    :raises RecursionError: the JSON is nested too deeply.
    """
    return json.loads(
        body.decode("utf-8"),
        object_pairs_hook=_unique_members,
        parse_constant=reject_constant,
        parse_float=finite_float,
    )


def parse_message(body: bytes) -> Incoming:
    """Parse a POST body into one :class:`Incoming` message.

    :raises JsonRpcError: -32700 (HTTP 400) for a body that is not JSON (bad UTF-8,
        syntax, a member name repeated in one object (RFC 8259 §4: the last one would win here and
        the first in another parser, e.g. a gateway's), ``NaN``/``Infinity`` or a number overflowing to infinity
        (:mod:`mcp_oauth.shared.strict_json`'s hooks, RFC 8259 §6), numbers beyond Python's digit limit, nesting too deep);
        -32600 (HTTP 400) for anything that is not one JSON-RPC 2.0 message object
        (batches, wrong ``jsonrpc``, bad ``id``/``method``/``params`` types).
    """
    try:
        data = strict_loads(body)
    except _RepeatedMember:
        raise JsonRpcError(PARSE_ERROR, "Parse error: a member name is repeated", http_status=400) from None
    except UnicodeDecodeError:
        raise JsonRpcError(PARSE_ERROR, "Parse error: the body is not UTF-8", http_status=400) from None
    except RecursionError:
        raise JsonRpcError(PARSE_ERROR, "Parse error: the JSON is nested too deeply", http_status=400) from None
    except ValueError:
        raise JsonRpcError(PARSE_ERROR, "Parse error: the body is not valid JSON", http_status=400) from None

    if isinstance(data, list):
        raise JsonRpcError(INVALID_REQUEST, "Invalid Request: JSON-RPC batches are not supported", http_status=400)
    if not isinstance(data, dict):
        raise JsonRpcError(INVALID_REQUEST, "Invalid Request: expected a JSON-RPC 2.0 object", http_status=400)

    has_id = "id" in data
    request_id = data.get("id")
    echo_id = request_id if is_valid_id(request_id) else None

    def invalid(reason: str) -> JsonRpcError:
        return JsonRpcError(INVALID_REQUEST, f"Invalid Request: {reason}", http_status=400, request_id=echo_id)

    if data.get("jsonrpc") != "2.0":
        raise invalid('"jsonrpc" must be "2.0"')
    # An error response may carry "id": null (JSON-RPC 2.0 §5: the id could not be read).
    null_id_allowed = "method" not in data and "error" in data and request_id is None
    if has_id and not is_valid_id(request_id) and not null_id_allowed:
        raise invalid('"id" must be a string or an integer')

    if "method" in data:
        method = data["method"]
        if not isinstance(method, str) or not method:
            raise invalid('"method" must be a non-empty string')
        params = data.get("params")
        if params is None:
            params = {}
        elif not isinstance(params, dict):
            raise invalid('"params" must be an object')
        if has_id:
            return Incoming("request", data, method=method, id=request_id, params=params)
        return Incoming("notification", data, method=method, params=params)

    if has_id and ("result" in data) != ("error" in data):
        if "result" in data and not isinstance(data["result"], dict):
            raise invalid('"result" must be an object')
        if "error" in data:
            error = data["error"]
            if not (isinstance(error, dict) and isinstance(error.get("code"), int) and "message" in error):
                raise invalid('"error" must be an object with "code" and "message"')
        return Incoming("response", data, id=request_id)

    raise invalid("not a request, notification or response")


def result_message(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
    """``{"jsonrpc": "2.0", "id": request_id, "result": result}``."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_message(request_id: RequestId | None, error: McpError | dict[str, Any]) -> dict[str, Any]:
    """``{"jsonrpc": "2.0", "id": request_id or null, "error": {...}}``."""
    body = error.to_error() if isinstance(error, McpError) else error
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def dumps(message: Any) -> str:
    """Compact JSON, ASCII-escaped (a lone surrogate in client input cannot break UTF-8 encoding)."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=True)
