"""A minimal MCP Apps host for browser tests, written to SEP-1865 ("Sandbox proxy", "Lifecycle",
"Host Behavior"): the host page (``host.html``) and the sandbox proxy (``sandbox.html``) on two
different loopback origins, and :class:`Recorder`, an ASGI app that serves fixed pages and records
every request it gets (it also stands for an origin a view must not reach).

The host page's backend is the test: the page calls ``window.mcpHost(method, params)`` (a
Playwright-exposed function) for the ``tools/call`` and ``resources/read`` a view sends, and the
test answers them with the official Python SDK client connected to the live server.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
HOST_PAGE = (HERE / "host.html").read_bytes()
SANDBOX_PAGE = (HERE / "sandbox.html").read_bytes()
#: The same host on the reference implementation's ``AppBridge`` (it imports ``/app-bridge.js``:
#: ``tests/js/app_bridge_entry.mjs`` bundled, see :func:`build_app_bridge`).
OFFICIAL_HOST_PAGE = (HERE / "host_official.html").read_bytes()
JS_DIR = HERE.parents[1] / "js"
ESBUILD = JS_DIR / "node_modules" / ".bin" / "esbuild"


def build_app_bridge(out: Path) -> bytes:
    """``@modelcontextprotocol/ext-apps/app-bridge`` bundled for the browser (esbuild, installed by
    ``make js-install``). :raises FileNotFoundError: not installed. :raises CalledProcessError:"""
    if not ESBUILD.exists():
        raise FileNotFoundError(ESBUILD)
    subprocess.run(
        [
            str(ESBUILD),
            "app_bridge_entry.mjs",
            "--bundle",
            "--format=esm",
            "--platform=browser",
            "--log-level=warning",
            f"--outfile={out}",
        ],
        cwd=JS_DIR,
        check=True,
        timeout=120,
    )
    return out.read_bytes()


class Recorder:
    """ASGI app: ``pages`` (path -> HTML bytes) answered 200, anything else 404; every request's
    path is recorded in :attr:`hits` (with CORS allowed, so a fetch that arrives also resolves)."""

    def __init__(self, pages: dict[str, bytes] | None = None) -> None:
        self.pages = dict(pages or {})
        self.hits: list[str] = []

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        self.hits.append(scope["path"])
        body = self.pages.get(scope["path"])
        status = 200 if body is not None else 404
        kind = b"text/javascript" if scope["path"].endswith(".js") else b"text/html; charset=utf-8"
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", kind),
                    (b"access-control-allow-origin", b"*"),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body if body is not None else b"not found"})

    async def wait_for(self, path: str, timeout: float = 10) -> None:
        """Wait until ``path`` was requested. :raises AssertionError: not within ``timeout`` seconds."""
        deadline = asyncio.get_running_loop().time() + timeout
        while path not in self.hits:
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{path} never arrived; got {self.hits!r}")
            await asyncio.sleep(0.05)
