"""One HTTP request through an ASGI application, in process (no server): the lanes' tests."""

from __future__ import annotations

import asyncio

from asgiref.sync import async_to_sync

__all__ = ["asgi_call", "http_scope"]


def http_scope(method: str, path: str, headers: dict[str, str], scheme: str = "http") -> dict:
    """The ASGI HTTP scope of one request to ``path`` from loopback; ``Host: testserver`` unless given
    (header names are lower-cased; a given one replaces the default)."""
    given = {"host": "testserver", **{k.lower(): v for k, v in headers.items()}}
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": scheme,
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(k.encode(), v.encode()) for k, v in given.items()],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 443 if scheme == "https" else 80),
    }


def asgi_call(
    app, method: str, path: str, headers: dict[str, str], body: bytes = b"", scheme: str = "http"
) -> tuple[int, dict, bytes]:
    """Send one request to ``app`` and wait for its whole response.

    ``Host: testserver`` and ``Content-Length`` are added unless given. The client disconnects
    once the response is complete (what uvicorn reports after the last body message).
    ``scheme``: the ASGI scope's (``"https"``: a request that came over TLS).

    :returns: ``(status, headers with lower-case names, body)``.
    """
    sent: list[dict] = []

    async def run():
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        done = asyncio.Event()

        async def receive():
            if messages:
                return messages.pop(0)
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                done.set()

        scope = http_scope(method, path, {"content-length": str(len(body)), **headers}, scheme)
        await app(scope, receive, send)

    async_to_sync(run)()
    start = next(m for m in sent if m["type"] == "http.response.start")
    response_headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], response_headers, data
