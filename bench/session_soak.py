"""Soak: the official MCP clients stay connected across many access-token lifetimes.

Starts the reference project on a loopback port (a scratch SQLite database unless ``DATABASE_URL``
is set) with ``ACCESS_TOKEN_EXPIRE_SECONDS`` = ``--access-token-lifetime``, then runs, at the same
time, for ``--minutes``:

* the Python SDK client (``mcp``: ``OAuthClientProvider``, one ``Client`` session in
  ``--python-mode``), and
* the TypeScript SDK 2.x client (``tests/js/oauth_client.mjs``, era ``--ts-era``; needs
  ``make js-install``),

each registering itself (RFC 7591), logging in and consenting once through the site's own pages
(a headless HTTP user agent), then calling the ``whoami`` tool every ``--interval`` seconds. It
prints, per client: the tool calls made and failed, the token responses (code exchanges, refreshes,
refused refreshes) and how many authorizations (logins) were needed after the first one, which
should be 0 while the session cap (``MCP_OAUTH["SESSION_MAX_SECONDS"]``, ``--session-max``) is
longer than the run. The exit status is 1 when a client failed a call or needed a new login.

    .venv/bin/python bench/session_soak.py --access-token-lifetime 60 --minutes 15
    .venv/bin/python bench/session_soak.py --access-token-lifetime 5 --minutes 2 --interval 3

Against a site that is already running, pass ``--base-url`` with a user's ``--username`` and
``--password`` (its own lifetimes apply then; ``--access-token-lifetime`` is ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

JS_CLIENT = ROOT / "tests" / "js" / "oauth_client.mjs"
USERNAME, PASSWORD = "soak", "soak-password-not-secret"


def start_site(args: argparse.Namespace, stack: ExitStack) -> str:
    """The reference project on a free loopback port, migrated, with the soak's user; its base URL."""
    from tests.support.live import free_port, run_asgi_server

    port = free_port()
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tempfile.mkdtemp()}/soak.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ["MCP_BASE_URL"] = f"http://127.0.0.1:{port}"
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost")
    os.environ.setdefault("MCP_LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.test import override_settings

    stack.enter_context(
        override_settings(
            OAUTH2_PROVIDER={
                **settings.OAUTH2_PROVIDER,
                "ACCESS_TOKEN_EXPIRE_SECONDS": args.access_token_lifetime,
                "ALWAYS_RELOAD_OAUTHLIB_CORE": True,
            },
            MCP_OAUTH={
                **settings.MCP_OAUTH,
                "BASE_URL": f"http://127.0.0.1:{port}",
                "SESSION_MAX_SECONDS": args.session_max,
                "THROTTLE_RATES": {"register": None, "authorize": None, "token": None},
            },
            ALLOWED_HOSTS=["127.0.0.1", "localhost"],
        )
    )
    call_command("migrate", verbosity=0, interactive=False)
    from django.contrib.auth import get_user_model

    from mcp_oauth.resource_server.default_resource import ensure_default_resource
    from project.asgi import application

    ensure_default_resource()
    if not get_user_model().objects.filter(username=USERNAME).exists():
        get_user_model().objects.create_user(USERNAME, "soak@example.com", PASSWORD)
    return stack.enter_context(run_asgi_server(application, port))


def new_stats(name: str) -> dict[str, Any]:
    return {"client": name, "calls": 0, "failed_calls": 0, "code_exchanges": 0, "refreshes": 0,
            "refused_refreshes": 0, "authorizations": 0, "errors": []}  # fmt: skip


async def python_client(base: str, args: argparse.Namespace, username: str, password: str) -> dict[str, Any]:
    """The Python SDK client calling ``whoami`` every ``--interval`` seconds for ``--minutes``."""
    import httpx2
    from mcp import Client
    from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import OAuthClientMetadata

    from tests.support.live import HeadlessBrowser, MemoryStorage, free_port

    stats = new_stats(f"python-sdk ({args.python_mode})")
    browser = HeadlessBrowser(base, username, password)
    pending: dict[str, str] = {}

    async def redirect_handler(url: str) -> None:
        pending["url"] = url

    async def callback_handler() -> AuthorizationCodeResult:
        stats["authorizations"] += 1
        params = await browser.authorize(pending.pop("url"))
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    provider = OAuthClientProvider(
        server_url=base + "/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="Soak Python SDK client",
            redirect_uris=[f"http://127.0.0.1:{free_port()}/callback"],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=MemoryStorage(),
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )

    async def count(response) -> None:
        if response.request.url.path != "/oauth/token":
            return
        body = response.request.content.decode("latin-1")
        if "grant_type=refresh_token" in body:
            stats["refreshes" if response.status_code == 200 else "refused_refreshes"] += 1
        elif response.status_code == 200:
            stats["code_exchanges"] += 1

    deadline = time.monotonic() + args.minutes * 60
    try:
        async with httpx2.AsyncClient(auth=provider, timeout=60, event_hooks={"response": [count]}) as http:
            async with Client(streamable_http_client(base + "/mcp", http_client=http), mode=args.python_mode) as client:
                while True:
                    stats["calls"] += 1
                    try:
                        result = await client.call_tool("whoami", {})
                        if result.is_error:
                            stats["failed_calls"] += 1
                    except Exception as exc:  # noqa: BLE001 - counted and reported
                        stats["failed_calls"] += 1
                        stats["errors"].append(repr(exc)[:300])
                    if time.monotonic() + args.interval > deadline:
                        break
                    await asyncio.sleep(args.interval)
    except Exception as exc:  # noqa: BLE001 - reported
        stats["errors"].append(repr(exc)[:500])
    finally:
        await browser.aclose()
    return stats


def typescript_client(base: str, args: argparse.Namespace, username: str, password: str) -> dict[str, Any]:
    """The TypeScript SDK client (``oauth_client.mjs``) for ``--minutes``; the driver plays the user."""
    from tests.support.live import HeadlessBrowser, free_port

    stats = new_stats(f"typescript-sdk ({args.ts_era})")
    node = shutil.which("node")
    if node is None or not (JS_CLIENT.parent / "node_modules" / "@modelcontextprotocol" / "client").exists():
        stats["errors"].append("node or tests/js/node_modules missing: run `make js-install`")
        return stats
    redirect_url = f"http://127.0.0.1:{free_port()}/callback"
    config = {
        "mcpUrl": base + "/mcp",
        "era": args.ts_era,
        "flow": "authorization_code",
        "redirectUrl": redirect_url,
        "clientName": "Soak TypeScript SDK client",
        "callIntervalMs": int(args.interval * 1000),
        "durationMs": int(args.minutes * 60 * 1000),
    }

    async def authorize(url: str) -> dict[str, str]:
        browser = HeadlessBrowser(base, username, password)
        try:
            return await browser.authorize(url)
        finally:
            await browser.aclose()

    process = subprocess.Popen(
        [node, str(JS_CLIENT), json.dumps(config)],
        cwd=JS_CLIENT.parent,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(args.minutes * 60 + 120, process.kill)
    watchdog.start()
    report = None
    try:
        assert process.stdout is not None and process.stdin is not None
        for line in process.stdout:
            if not line.startswith("{"):
                continue
            message = json.loads(line)
            if message.get("event") == "authorize":
                params = asyncio.run(authorize(message["url"]))
                process.stdin.write(json.dumps({"callback": f"{redirect_url}?{urlencode(params)}"}) + "\n")
                process.stdin.flush()
            elif message.get("event") == "report":
                report = message
        process.wait(timeout=30)
    finally:
        watchdog.cancel()
        if process.poll() is None:
            process.kill()
    if report is None:
        stats["errors"].append("no report from the Node client: " + (process.stderr.read() if process.stderr else ""))
        return stats
    stats["authorizations"] = report["authorizations"]
    stats["calls"] = len(report["calls"]) + len(report["errors"])
    stats["failed_calls"] = sum(1 for call in report["calls"] if call["isError"]) + len(report["errors"])
    stats["errors"] = [error[:500] for error in report["errors"]]
    for exchange in report["exchanges"]:
        if exchange["path"] != "/oauth/token":
            continue
        if exchange["grantType"] == "refresh_token":
            stats["refreshes" if exchange["status"] == 200 else "refused_refreshes"] += 1
        elif exchange["status"] == 200:
            stats["code_exchanges"] += 1
    return stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--access-token-lifetime", type=int, default=60, help="seconds (default 60)")
    parser.add_argument("--minutes", type=float, default=15.0, help="how long the clients run (default 15)")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between tool calls (default 10)")
    parser.add_argument("--session-max", type=int, default=90 * 24 * 3600, help="SESSION_MAX_SECONDS (default 90 d)")
    parser.add_argument("--python-mode", default="legacy", choices=["legacy", "auto"])
    parser.add_argument("--ts-era", default="legacy", choices=["legacy", "auto", "2026-07-28"])
    parser.add_argument("--base-url", help="a running site instead of the reference project started here")
    parser.add_argument("--username", default=USERNAME)
    parser.add_argument("--password", default=PASSWORD)
    args = parser.parse_args()

    with ExitStack() as stack:
        if args.base_url:
            base, username, password = args.base_url.rstrip("/"), args.username, args.password
        else:
            base, username, password = start_site(args, stack), USERNAME, PASSWORD
        print(
            f"soak: {base}, access tokens {args.access_token_lifetime} s, {args.minutes:g} min, "
            f"a call every {args.interval:g} s",
            flush=True,
        )
        started = time.monotonic()
        holder: dict[str, dict[str, Any]] = {}
        ts_thread = threading.Thread(
            target=lambda: holder.setdefault("ts", typescript_client(base, args, username, password)), daemon=True
        )
        ts_thread.start()
        python = asyncio.run(python_client(base, args, username, password))
        ts_thread.join()
        elapsed = time.monotonic() - started
    ok = True
    for stats in (python, holder.get("ts") or new_stats("typescript-sdk")):
        logins_after_first = max(0, stats["authorizations"] - 1)
        ok = ok and not stats["failed_calls"] and not logins_after_first and stats["authorizations"] == 1
        print(
            f"{stats['client']}: {stats['calls']} calls ({stats['failed_calls']} failed), "
            f"{stats['code_exchanges']} code exchange(s), {stats['refreshes']} refreshes "
            f"({stats['refused_refreshes']} refused), logins needed after the first: {logins_after_first}"
        )
        for error in stats["errors"][:5]:
            print(f"  error: {error}")
    print(f"{'OK' if ok else 'FAILED'}: {elapsed:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
