"""A TLS-terminating reverse proxy on loopback, as an operator puts in front of ``make serve``.

:class:`TLSProxy` serves ``https://localhost:<port>`` (the test CA's certificate of
``tests/support/https_server.py``) with uvicorn in a thread and forwards every request to an http backend
the way nginx's ``proxy_set_header X-Forwarded-Proto $scheme`` does: the client's ``Host`` kept,
``X-Forwarded-Proto: https`` and ``X-Forwarded-For`` set (whatever the client sent under those
names is dropped), the response streamed back as it comes (event streams included).
"""

from __future__ import annotations

import contextlib
import ssl
import threading
import time
from collections.abc import Iterator

import httpx2
import uvicorn

from tests.support.https_server import TestPKI, shared_pki
from tests.support.live import free_port

HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"te", b"trailer", b"upgrade", b"proxy-connection"}
REPLACED = {b"x-forwarded-proto", b"x-forwarded-for", b"forwarded"}


class TLSProxy:
    """ASGI app forwarding to ``backend`` (``http://127.0.0.1:<port>``); :attr:`requests` counts them."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.requests = 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        self.requests += 1
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in HOP_BY_HOP | REPLACED]
        headers += [(b"x-forwarded-proto", b"https"), (b"x-forwarded-for", scope["client"][0].encode())]
        url = self.backend + scope["raw_path"].decode("latin-1")
        if scope.get("query_string"):
            url += "?" + scope["query_string"].decode("latin-1")
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(60, read=None), follow_redirects=False) as client:
            request = client.build_request(scope["method"], url, headers=headers, content=body)
            response = await client.send(request, stream=True)
            await self._relay(response, send)

    @staticmethod
    async def _relay(response, send) -> None:
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [(k, v) for k, v in response.headers.raw if k.lower() not in HOP_BY_HOP],
                }
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()


def client_context(pki: TestPKI | None = None) -> ssl.SSLContext:
    """An SSL context trusting the test CA (what a client of the proxy verifies against)."""
    return ssl.create_default_context(cafile=str((pki or shared_pki()).ca_file))


@contextlib.contextmanager
def tls_proxy(backend: str) -> Iterator[tuple[str, TLSProxy]]:
    """``https://localhost:<port>`` forwarding to ``backend`` until the block ends; yields (base URL, proxy)."""
    pki = shared_pki()
    port = free_port()
    proxy = TLSProxy(backend)
    config = uvicorn.Config(
        proxy,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="off",
        proxy_headers=False,  # the edge: nothing a client sends under X-Forwarded-* is believed
        ssl_certfile=str(pki.cert_file),
        ssl_keyfile=str(pki.key_file),
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"tls-proxy-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the TLS proxy did not start")
        time.sleep(0.02)
    try:
        yield f"https://localhost:{port}", proxy
    finally:
        server.should_exit = True
        thread.join(timeout=10)
