"""Resource contents: URI checks, reader return values -> ``contents``, sizes (MCP "Resources" / "Reading Resources")."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import mcp_types as types
import pydantic_core
from pydantic import BaseModel

from mcp_oauth.mcp_server.registry.errors import malformed_uri

__all__ = ["MAX_URI_LENGTH", "Contents", "ResourceNotFound", "check_uri", "content_size", "to_contents"]

Contents = types.TextResourceContents | types.BlobResourceContents

#: Longest URI accepted by ``resources/read`` / ``subscribe`` (bytes of UTF-8; fits a database index).
MAX_URI_LENGTH = 2048
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


class ResourceNotFound(Exception):
    """Raise from a reader: the URI names nothing this user may read (answered like an unknown URI)."""


def check_uri(uri: object) -> str:
    """``uri`` if it is a plausible absolute URI (RFC 3986 §3 scheme, no whitespace or control characters).

    :raises McpError: -32602 "Malformed resource URI" naming what is wrong.
    """
    if not isinstance(uri, str):
        raise malformed_uri(uri, "the URI must be a string")
    if not uri:
        raise malformed_uri(uri, "the URI is empty")
    if len(uri.encode("utf-8", "surrogatepass")) > MAX_URI_LENGTH:
        raise malformed_uri(uri, f"the URI is longer than {MAX_URI_LENGTH} bytes (UTF-8)")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in uri):
        raise malformed_uri(uri, "the URI contains whitespace or control characters")
    if not _SCHEME_RE.match(uri):
        raise malformed_uri(uri, "the URI has no scheme (RFC 3986 §3.1)")
    return uri


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    return pydantic_core.to_jsonable_python(value)


def to_contents(uri: str, mime_type: str | None, value: Any) -> list[Contents]:
    """Convert a reader's return value to ``contents`` (see the module docstring).

    :raises ResourceNotFound: ``value`` is None.
    :raises TypeError: a value that cannot be sent.
    """
    if value is None:
        raise ResourceNotFound(uri)
    if isinstance(value, types.ReadResourceResult):
        return list(value.contents)
    if isinstance(value, (types.TextResourceContents, types.BlobResourceContents)):
        return [value]
    if (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(item, (types.TextResourceContents, types.BlobResourceContents)) for item in value)
    ):
        return list(value)
    if isinstance(value, str):
        return [types.TextResourceContents(uri=uri, mime_type=mime_type or "text/plain", text=value)]
    if isinstance(value, (bytes, bytearray, memoryview)):
        blob = base64.b64encode(bytes(value)).decode("ascii")
        return [types.BlobResourceContents(uri=uri, mime_type=mime_type or "application/octet-stream", blob=blob)]
    text = json.dumps(_jsonable(value), ensure_ascii=False, allow_nan=False)
    return [types.TextResourceContents(uri=uri, mime_type=mime_type or "application/json", text=text)]


def content_size(contents: Iterable[Contents]) -> int:
    """Bytes of the raw content (UTF-8 text, decoded blobs), as ``Resource.size`` counts them."""
    total = 0
    for item in contents:
        if isinstance(item, types.TextResourceContents):
            total += len(item.text.encode("utf-8"))
        else:
            total += len(item.blob) * 3 // 4 - item.blob[-2:].count("=")
    return total


def _annotations(value: types.Annotations | Mapping[str, Any] | None) -> types.Annotations | None:
    if value is None or isinstance(value, types.Annotations):
        return value
    return types.Annotations.model_validate(dict(value))


def _icons(icons: Iterable[types.Icon | Mapping[str, Any]] | None) -> list[types.Icon] | None:
    if icons is None:
        return None
    return [i if isinstance(i, types.Icon) else types.Icon.model_validate(dict(i)) for i in icons]
