"""The ASGI lanes' plumbing (mcp_oauth.shared.lanes): request headers read from the scope as
Django reads them from ``META``, and the path below ``root_path``."""

from __future__ import annotations

from django.http.request import HttpHeaders

from mcp_oauth.shared.lanes import ScopeHeaders, http_path

RAW = [
    (b"Content-Type", b"application/json"),
    (b"accept", b"application/json"),
    (b"Accept", b"text/event-stream"),
    (b"x_underscored", b"dropped"),
    (b"X-Caf\xe9", b"cr\xe8me"),
]


def test_scope_headers_read_like_django_s_http_headers():
    headers = ScopeHeaders(RAW)
    assert headers["content-type"] == headers["Content-Type"] == "application/json"
    assert headers["Accept"] == "application/json,text/event-stream"
    assert "x_underscored" not in headers and "X-Underscored" not in headers
    assert headers["x-café"] == "crème"
    meta = {"CONTENT_TYPE": "application/json", "HTTP_ACCEPT": "application/json,text/event-stream"}
    assert {k.lower(): v for k, v in HttpHeaders(meta).items()} == {
        k.lower(): v for k, v in headers.items() if k.lower() in ("content-type", "accept")
    }


def test_http_path_is_below_the_root_path_and_none_for_other_scopes():
    assert http_path({"type": "http", "path": "/mcp"}) == "/mcp"
    assert http_path({"type": "http", "path": "/tenant/mcp", "root_path": "/tenant"}) == "/mcp"
    assert http_path({"type": "http", "path": "/other/mcp", "root_path": "/tenant"}) == "/other/mcp"
    assert http_path({"type": "websocket", "path": "/mcp"}) is None
    assert http_path({"type": "lifespan"}) is None
