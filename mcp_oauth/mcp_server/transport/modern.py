"""MCP 2026-07-28 stateless requests: the ``_meta`` envelope, its validation ladder,
``server/discover`` and ``subscriptions/listen``.

A request is served in the modern era (:func:`is_modern`) when its ``params._meta`` carries
``io.modelcontextprotocol/protocolVersion``, its ``MCP-Protocol-Version`` header names a modern
revision, or its method exists only there. Nothing is stored between requests: capabilities,
client info and log level come from each request's ``_meta`` (:class:`Envelope`).

The ladder (:func:`check_envelope`), first failing rung answers (MCP 2026-07-28 "Transports"):

=====================================================================  =====  ======
rung                                                                   HTTP   code
=====================================================================  =====  ======
``params._meta`` lacks protocolVersion / clientCapabilities            400    -32602
``MCP-Protocol-Version`` ≠ the envelope's version                      400    -32020
``Mcp-Method`` ≠ ``method``                                            400    -32020
``Mcp-Name`` ≠ the named param (``tools/call`` name, …)                400    -32020
version not a modern revision we serve (``data.supported/requested``)  400    -32022
method unknown in this era (front end, :mod:`.methods`)                404    -32601
needed client capability not declared (``data.requiredCapabilities``)  400    -32021
``tools/call``: ``Mcp-Param-*`` ≠ an ``x-mcp-header`` argument          400    -32020
=====================================================================  =====  ======
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import mcp_types as types
from asgiref.sync import sync_to_async

from mcp_oauth.mcp_server.transport import subscriptions
from mcp_oauth.mcp_server.transport.capabilities import discover_capabilities
from mcp_oauth.mcp_server.transport.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
    JsonRpcError,
)
from mcp_oauth.mcp_server.transport.table import MODERN_VERSIONS, SUPPORTED_VERSIONS, Call, Method, parse_params
from mcp_oauth.settings import mcp_oauth_settings

__all__ = [
    "MODERN_ONLY_METHODS",
    "SUBSCRIPTION_ID_META_KEY",
    "Envelope",
    "check_capability",
    "check_envelope",
    "discover",
    "is_modern",
    "listen",
    "unsupported_version",
]

VERSION_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"
SUBSCRIPTION_ID_META_KEY = "io.modelcontextprotocol/subscriptionId"
#: Methods that exist only in the modern era: they select it by themselves.
MODERN_ONLY_METHODS = frozenset({"server/discover", "subscriptions/listen"})
_B64_SENTINEL = re.compile(r"^=\?base64\?(?P<payload>.*)\?=$")


@dataclass(frozen=True)
class Envelope:
    """What a modern request says about its client (``params._meta``)."""

    protocol_version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any]
    log_level: str | None


def is_modern(method: str | None, params: Mapping[str, Any] | None, version_header: str | None) -> bool:
    """Whether a request belongs to the 2026-07-28 era (see the module docstring)."""
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    if isinstance(meta, Mapping) and types.PROTOCOL_VERSION_META_KEY in meta:
        return True
    if version_header is not None and field_value(version_header) in MODERN_VERSIONS:
        return True
    return method in MODERN_ONLY_METHODS


def unsupported_version(requested: Any, request_id: Any = None) -> JsonRpcError:
    """-32022 (HTTP 400) with ``data: {"supported": [...every revision served...], "requested"}``."""
    shown = str(requested)[:40]
    return JsonRpcError(
        UNSUPPORTED_PROTOCOL_VERSION,
        f"Bad Request: unsupported protocol version: {shown!r}",
        data={"supported": list(SUPPORTED_VERSIONS), "requested": shown},
        http_status=400,
        request_id=request_id,
    )


def field_value(value: str | None) -> str | None:
    """A header field value without its optional whitespace (RFC 9110 §5.5: SP and HTAB around
    the value are not part of it). HTTP servers differ here (h11 strips it, httptools does not),
    so every comparison of an MCP header goes through this."""
    return value.strip(" \t") if value is not None else None


def decode_header_value(value: str | None) -> str | None:
    """A header value, without its optional whitespace and with the ``=?base64?…?=`` form of
    non-ASCII values decoded (None: absent or malformed)."""
    value = field_value(value)
    if value is None:
        return None
    match = _B64_SENTINEL.fullmatch(value)
    if match is None:
        return value
    payload = match.group("payload")
    try:
        decoded = base64.b64decode(payload, validate=True)
        if base64.b64encode(decoded).decode("ascii") != payload:
            return None
        return decoded.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def check_envelope(
    method: str, params: Mapping[str, Any], headers: Mapping[str, str], request_id: Any, name_param: str | None
) -> Envelope:
    """Run the ladder's envelope and header rungs; the request's :class:`Envelope`.

    :param headers: case-insensitive request headers (Django's ``request.headers``).
    :param name_param: the params key the ``Mcp-Name`` header mirrors (None: no such header).
    :raises JsonRpcError: -32602, -32020 or -32022 with HTTP 400.
    """

    def reject(code: int, message: str) -> JsonRpcError:
        return JsonRpcError(code, message, http_status=400, request_id=request_id)

    meta = params.get("_meta")
    if not isinstance(meta, Mapping):
        raise reject(
            INVALID_PARAMS,
            f"Invalid params: params._meta must carry {types.PROTOCOL_VERSION_META_KEY!r} and "
            f"{types.CLIENT_CAPABILITIES_META_KEY!r}",
        )
    missing = [key for key in (types.PROTOCOL_VERSION_META_KEY, types.CLIENT_CAPABILITIES_META_KEY) if key not in meta]
    if missing:
        raise reject(INVALID_PARAMS, f"Invalid params: params._meta lacks {', '.join(missing)}")
    version = meta[types.PROTOCOL_VERSION_META_KEY]
    header = field_value(headers.get(VERSION_HEADER))
    if header is None or header != version:
        raise reject(HEADER_MISMATCH, f"Bad Request: {VERSION_HEADER} header does not match params._meta")
    if field_value(headers.get(METHOD_HEADER)) != method:
        raise reject(HEADER_MISMATCH, f"Bad Request: {METHOD_HEADER} header does not match the method")
    if name_param is not None:
        value = params.get(name_param)
        if value is not None and decode_header_value(headers.get(NAME_HEADER)) != value:
            raise reject(HEADER_MISMATCH, f"Bad Request: {NAME_HEADER} header does not match params.{name_param}")
    if not isinstance(version, str):
        raise reject(INVALID_PARAMS, "Invalid params: the protocol version must be a string")
    if version not in MODERN_VERSIONS:
        raise unsupported_version(version, request_id)
    capabilities = meta[types.CLIENT_CAPABILITIES_META_KEY]
    if not isinstance(capabilities, Mapping):
        raise reject(INVALID_PARAMS, f"Invalid params: {types.CLIENT_CAPABILITIES_META_KEY} must be an object")
    info = meta.get(types.CLIENT_INFO_META_KEY)
    level = meta.get(types.LOG_LEVEL_META_KEY)
    return Envelope(
        protocol_version=version,
        client_capabilities=dict(capabilities),
        client_info=dict(info) if isinstance(info, Mapping) else {},
        log_level=level if isinstance(level, str) else None,
    )


PARAM_HEADER_PREFIX = "Mcp-Param-"
X_MCP_HEADER = "x-mcp-header"


def _annotated(schema: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """``(property path, header token)`` of every ``x-mcp-header`` reachable through ``properties``."""
    found: list[tuple[tuple[str, ...], str]] = []
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return found
    for name, sub in properties.items():
        if not isinstance(sub, Mapping):
            continue
        token = sub.get(X_MCP_HEADER)
        if isinstance(token, str) and token:
            found.append(((*path, name), token))
        found.extend(_annotated(sub, (*path, name)))
    return found


#: ``id(schema) -> (schema, its x-mcp-header annotations)``: a tool's input schema is fixed once it
#: is registered, and walking it on every call was measurable. The schema is kept in the entry,
#: so its id cannot be reused while cached; the map is emptied when it grows past
#: :data:`_ANNOTATED_CACHE_SIZE` (schemas built per call, not a registry's).
_annotated_cache: dict[int, tuple[Any, tuple[tuple[tuple[str, ...], str], ...]]] = {}
_ANNOTATED_CACHE_SIZE = 1024


def _annotations(schema: Any) -> tuple[tuple[tuple[str, ...], str], ...]:
    """:func:`_annotated` of ``schema``, cached per schema object."""
    entry = _annotated_cache.get(id(schema))
    if entry is not None and entry[0] is schema:
        return entry[1]
    found = tuple(_annotated(schema))
    if len(_annotated_cache) >= _ANNOTATED_CACHE_SIZE:
        _annotated_cache.clear()
    _annotated_cache[id(schema)] = (schema, found)
    return found


def _render(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        try:
            return str(value)
        except ValueError:  # an int beyond the digit limit
            return None
    return None


def check_param_headers(input_schema: Any, arguments: Any, headers: Mapping[str, str], request_id: Any) -> None:
    """MCP 2026-07-28 "Custom headers": every argument whose schema property carries
    ``x-mcp-header: <token>`` is mirrored in ``Mcp-Param-<token>``; header and argument must be
    present together and equal (after ``=?base64?…?=`` decoding; integers compare as numbers).

    :raises JsonRpcError: -32020 (HTTP 400) on the first disagreement.
    """
    annotations = _annotations(input_schema)
    if not annotations:
        return
    arguments = arguments if isinstance(arguments, Mapping) else {}
    for path, token in annotations:
        header_name = PARAM_HEADER_PREFIX + token
        raw = headers.get(header_name)
        value: Any = arguments
        for part in path:
            value = value.get(part) if isinstance(value, Mapping) else None
        rendered = _render(value) if value is not None else None
        if raw is None and rendered is None:
            continue
        decoded = decode_header_value(raw)
        same = rendered is not None and decoded is not None and decoded == rendered
        if (
            not same
            and rendered is not None
            and decoded is not None
            and isinstance(value, int)
            and not isinstance(value, bool)
        ):
            same = re.fullmatch(r"-?[0-9]+(\.0+)?", decoded) is not None and int(decoded.split(".")[0]) == value
        if not same:
            raise JsonRpcError(
                HEADER_MISMATCH,
                f"Bad Request: {header_name} header does not match the argument {'.'.join(path)!r}",
                http_status=400,
                request_id=request_id,
            )


def check_capability(entry: Method, envelope: Envelope, request_id: Any) -> None:
    """-32021 (HTTP 400) when ``entry`` needs a client capability the envelope does not declare."""
    if entry.capability is None:
        return
    node: Any = envelope.client_capabilities
    for part in entry.capability:
        node = node.get(part) if isinstance(node, Mapping) else None
    if not isinstance(node, Mapping):
        required: dict[str, Any] = {}
        for part in reversed(entry.capability):
            required = {part: required}
        raise JsonRpcError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"Bad Request: {entry.name} needs the client capability {'.'.join(entry.capability)}",
            data={"requiredCapabilities": required},
            http_status=400,
            request_id=request_id,
        )


async def discover(call: Call) -> dict[str, Any]:
    """``server/discover`` (MCP 2026-07-28 "Lifecycle"): every revision served (modern first), the
    capabilities and instructions; the table adds ``ttlMs``/``cacheScope`` (public: the same for
    every caller) and ``serverInfo``."""
    parse_params(call)
    result: dict[str, Any] = {"supportedVersions": list(SUPPORTED_VERSIONS), "capabilities": discover_capabilities()}
    if mcp_oauth_settings.INSTRUCTIONS:
        result["instructions"] = str(mcp_oauth_settings.INSTRUCTIONS)
    return result


def _honoured(requested: Any) -> dict[str, Any]:
    wanted = requested.model_dump(by_alias=True, exclude_none=True) if requested is not None else {}
    honoured: dict[str, Any] = {}
    for key, value in wanted.items():
        if key not in subscriptions.supported_filters:
            continue
        if key == "resourceSubscriptions":
            uris = [u for u in value if isinstance(u, str)][:100]
            if uris:
                honoured[key] = uris
        elif value is True:
            honoured[key] = True
    return honoured


#: Extra ``subscriptions/listen`` filters (an extension's, e.g. the Tasks extension's ``taskIds``):
#: ``async hook(call, requested) -> (honoured entries, relay or None)``; ``requested`` is the raw
#: ``params.notifications`` object; the hook may raise :class:`JsonRpcError` (-32021, -32602);
#: ``relay(sink, stamp)`` runs beside the stream until it closes, sending its own notifications.
ListenRelay = Callable[[Callable[[dict[str, Any]], Awaitable[None]], dict[str, Any]], Awaitable[None]]
listen_hooks: list[Callable[[Call, Mapping[str, Any]], Awaitable[tuple[dict[str, Any], ListenRelay | None]]]] = []


async def listen(call: Call) -> dict[str, Any]:
    """``subscriptions/listen``: acknowledge the honoured filter, then relay matching events until
    the client closes the stream (MCP 2026-07-28 "Subscriptions").

    :raises JsonRpcError: -32600 (400) when the response cannot stream (WSGI).
    """
    params = parse_params(call)
    if call.sink is None:
        raise JsonRpcError(
            INVALID_REQUEST, "Bad Request: subscriptions/listen needs a streaming (ASGI) response", http_status=400
        )
    honoured = _honoured(getattr(params, "notifications", None))
    requested = call.params.get("notifications")
    relays: list[ListenRelay] = []
    for hook in listen_hooks:
        part, relay = await hook(call, requested if isinstance(requested, Mapping) else {})
        honoured.update(part)
        if relay is not None:
            relays.append(relay)
    stamp = {SUBSCRIPTION_ID_META_KEY: call.message_id}
    uris = set(honoured.get("resourceSubscriptions", ()))
    async with subscriptions.get_broker().subscribe() as queue:
        call.open_stream()
        await call.sink(
            {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {"notifications": honoured, "_meta": stamp},
            }
        )
        running = [asyncio.ensure_future(relay(call.sink, stamp)) for relay in relays]
        try:
            await _relay_events(call, queue, honoured, uris, stamp)
        finally:
            for task in running:
                task.cancel()


async def _relay_events(
    call: Call, queue: asyncio.Queue, honoured: dict[str, Any], uris: set[str], stamp: dict[str, Any]
) -> NoReturn:
    assert call.sink is not None
    while True:
        event: subscriptions.Event = await queue.get()
        if event.filter not in honoured or (event.uri is not None and event.uri not in uris):
            continue
        if event.audience is not None and not await sync_to_async(subscriptions.reaches)(event, call.principal):
            continue
        await call.sink({"jsonrpc": "2.0", "method": event.method, "params": {**(event.params or {}), "_meta": stamp}})
