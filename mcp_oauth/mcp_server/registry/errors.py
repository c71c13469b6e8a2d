"""Errors of the resource, prompt and completion methods (JSON-RPC codes of MCP 2025-11-25 / 2026-07-28).

==========================================  =======  =========================================
condition                                   code     message starts with
==========================================  =======  =========================================
unknown URI, or one this user may not read  -32602   ``Resource not found: <uri>``
malformed URI (not an absolute URI)         -32602   ``Malformed resource URI``
template parameter that fails its type      -32602   ``Invalid resource URI <uri>: parameter``
content larger than the limit               -32602   ``Resource too large: <uri>``
unknown prompt                              -32602   ``Unknown prompt: <name>``
prompt without a required argument          -32602   ``Missing required argument(s) for prompt``
unknown completion reference                -32602   ``Unknown prompt`` / ``Unknown resource template``
item needs scopes the token lacks           HTTP 403 ``insufficient_scope`` (:class:`InsufficientScope`)
==========================================  =======  =========================================

"Resource not found" is ``-32602`` as in 2026-07-28 (which retired 2025-11-25's
``-32002``): one code and one message whether the URI does not exist or the user
may not see it, so an answer never tells another user's row exists.
"""

from __future__ import annotations

from collections.abc import Iterable

from mcp_oauth.mcp_server.transport.jsonrpc import INVALID_PARAMS, McpError

__all__ = [
    "InsufficientScope",
    "McpError",
    "invalid_uri",
    "malformed_uri",
    "resource_not_found",
    "resource_too_large",
]

_SHOWN = 200


def _show(value: object) -> str:
    text = str(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


class InsufficientScope(Exception):
    """The token lacks scopes an item needs: the endpoint answers HTTP 403 ``insufficient_scope``.

    ``kind`` (``"resource"``, ``"prompt"``), ``name`` (URI or prompt name),
    ``required`` (every scope the item needs), ``missing`` (those the token lacks).
    """

    def __init__(self, kind: str, name: str, required: Iterable[str], missing: Iterable[str]) -> None:
        self.kind = kind
        self.name = name
        self.required = tuple(required)
        self.missing = tuple(missing)
        super().__init__(f"The {kind} {_show(name)} needs the scopes: {' '.join(self.missing)}")


def resource_not_found(uri: str) -> McpError:
    return McpError(INVALID_PARAMS, f"Resource not found: {_show(uri)}", {"uri": _show(uri)})


def malformed_uri(uri: object, reason: str) -> McpError:
    return McpError(INVALID_PARAMS, f"Malformed resource URI: {reason}", {"uri": _show(uri)})


def invalid_uri(uri: str, parameter: str, reason: str) -> McpError:
    return McpError(
        INVALID_PARAMS,
        f"Invalid resource URI {_show(uri)}: parameter {parameter!r} {reason}",
        {"uri": _show(uri), "parameter": parameter},
    )


def resource_too_large(uri: str, size: int | None, limit: int) -> McpError:
    shown = f"{size} bytes" if size is not None else "larger than allowed"
    return McpError(
        INVALID_PARAMS,
        f"Resource too large: {_show(uri)} is {shown}, the limit is {limit} bytes",
        {"uri": _show(uri), "size": size, "limit": limit},
    )
