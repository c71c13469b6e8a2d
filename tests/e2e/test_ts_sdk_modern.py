"""The official MCP TypeScript SDK 2.x client pinned to 2026-07-28, against the live server.

``@modelcontextprotocol/client`` 2.4.0 (pinned in ``tests/js/package.json`` and its lockfile) runs
``tests/js/modern_client.mjs`` in Node with ``versionNegotiation: {mode: {pin: "2026-07-28"}}``:
``server/discover`` must offer the revision (no fallback), then ``tools/list``, ``whoami`` and
``ask_name``, whose form arrives as an ``input_required`` result that the SDK fulfils through its
``elicitation/create`` handler and retries with the echoed ``requestState``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from elicitation.models import Elicitation
from mcp_oauth.models import McpSession
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.live import free_port, run_asgi_server

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

JS_DIR = Path(__file__).resolve().parents[1] / "js"
SCRIPT = JS_DIR / "modern_client.mjs"
CLIENT_VERSION = "2.4.0"
CLIENT_PACKAGE_JSON = JS_DIR / "node_modules" / "@modelcontextprotocol" / "client" / "package.json"


def _installed_version() -> str | None:
    try:
        return json.loads(CLIENT_PACKAGE_JSON.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


@pytest.fixture(scope="session")
def node() -> str:
    """``node`` with the pinned 2.x client installed in ``tests/js`` (``npm ci`` when missing)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed: the TypeScript SDK test needs `node` (and `npm` to install the SDK)")
    if _installed_version() != CLIENT_VERSION:
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip(f"npm is not installed: cannot install @modelcontextprotocol/client {CLIENT_VERSION}")
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"`npm ci` in tests/js failed:\n{done.stdout}\n{done.stderr}"
    assert _installed_version() == CLIENT_VERSION, "tests/js/node_modules does not hold the pinned 2.x client"
    return node


def test_typescript_sdk_2_pinned_to_2026_07_28(node, settings, user, public_app, mint_token):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    resource = ensure_default_resource()
    token = mint_token(user, public_app, "mcp", resource.uri)
    from project.asgi import application

    with run_asgi_server(application, port) as served:
        done = subprocess.run(
            [node, str(SCRIPT), served + "/mcp", token, "Ada"], cwd=JS_DIR, capture_output=True, text=True, timeout=180
        )
    assert done.returncode == 0, f"node exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no report from the Node client:\n{done.stdout}\n{done.stderr}"
    report = json.loads(lines[-1])
    assert report["errors"] == [], report["errors"]
    assert report["sdkVersion"] == CLIENT_VERSION
    assert report["protocolVersion"] == "2026-07-28"
    assert {"whoami", "ask_name"} <= set(report["tools"])

    whoami = report["calls"]["whoami"]["result"]
    assert whoami["isError"] is False and whoami["structured"]["user"] == user.get_username()
    asked = report["calls"]["ask_name"]["result"]
    assert asked == {"isError": False, "text": "Hello, Ada!", "structured": None}
    assert report["elicitations"] == [
        {"mode": "form", "message": "What is your name?", "requestedSchema": Elicitation.objects.get().requested_schema}
    ]

    posts = [w for w in report["wire"] if w["method"]]
    assert posts[0]["method"] == "server/discover"
    assert all(w["protocolVersionHeader"] == "2026-07-28" for w in posts)
    assert all(w["mcpMethod"] == w["method"] for w in posts)
    calls = [w for w in posts if w["method"] == "tools/call"]
    assert [(w["mcpName"], w["hasRequestState"]) for w in calls] == [
        ("whoami", False),
        ("ask_name", False),
        ("ask_name", True),
    ]
    assert not any(w["sessionId"] for w in report["wire"])
    assert "initialize" not in {w["method"] for w in posts}
    assert not McpSession.objects.exists()
    assert Elicitation.objects.get().status == "accepted"
