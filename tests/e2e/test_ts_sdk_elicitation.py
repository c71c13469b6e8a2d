"""Capability gating of elicitation, seen by the official MCP TypeScript SDK client.

``@modelcontextprotocol/sdk`` 1.32.2 (pinned in ``tests/js/package.json`` and its lockfile,
installed by ``make test``) runs in Node against the live ASGI server, with a bearer token,
declaring one elicitation capability per run, and calls ``ask_name`` (form mode),
``demo_profile`` (-32042 for URL-capable clients) and ``set_api_key`` (``elicitation/create``
with ``mode: "url"`` for URL-capable clients). ``tests/js/elicitation_client.mjs`` records
everything the server sent on the wire and prints it as one JSON line.

* ``elicitation: {}`` and ``elicitation: {form: {}}``: the form works; URL mode and -32042
  never reach the client, the two URL tools end with a tool error naming the connections
  page, and the server creates no URL-mode elicitation.
* ``elicitation: {form: {}, url: {}}`` (positive control): -32042 with a URL elicitation, and
  ``elicitation/create`` with ``mode: "url"`` during ``set_api_key``, so the gate is what differs.
* no ``elicitation`` capability: nothing is sent at all; every one of the three is a tool error.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command

from elicitation.models import Elicitation
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.live import free_port, run_asgi_server

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

JS_DIR = Path(__file__).resolve().parents[1] / "js"
SCRIPT = JS_DIR / "elicitation_client.mjs"
SDK_VERSION = "1.32.2"
SDK_PACKAGE_JSON = JS_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
URL_ELICITATION_REQUIRED = -32042
ALL_TOOLS = ("ask_name", "demo_profile", "set_api_key")


def _installed_sdk_version() -> str | None:
    try:
        return json.loads(SDK_PACKAGE_JSON.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


@pytest.fixture(scope="session")
def node() -> str:
    """The ``node`` executable, with the pinned SDK installed in ``tests/js`` (``make test`` does
    ``npm ci`` there; a bare ``pytest`` run does it here when it is missing)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed: the TypeScript SDK test needs `node` (and `npm` to install the SDK)")
    if _installed_sdk_version() != SDK_VERSION:
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip(f"npm is not installed: cannot install @modelcontextprotocol/sdk {SDK_VERSION} into tests/js")
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"`npm ci` in tests/js failed:\n{done.stdout}\n{done.stderr}"
    assert _installed_sdk_version() == SDK_VERSION, "tests/js/node_modules does not hold the pinned SDK"
    return node


@dataclass
class Live:
    base: str
    token: str

    @property
    def mcp_url(self) -> str:
        return self.base + "/mcp"

    @property
    def connections_url(self) -> str:
        return self.base + "/elicitation/connections/"


@pytest.fixture
def live(settings, user, public_app, mint_token):
    """The reference site on a loopback port, with the ``demo`` provider and a token for ``user``."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    settings.ELICITATION = {**settings.ELICITATION, "ENCRYPTION_KEYS": [Fernet.generate_key().decode()]}
    call_command("ensure_demo_provider", stdout=io.StringIO())
    resource = ensure_default_resource()
    assert resource.uri == base + "/mcp"
    token = mint_token(user, public_app, "mcp", resource.uri)
    from project.asgi import application

    with run_asgi_server(application, port) as served:
        yield Live(base=served, token=token)


def run_client(node: str, live: Live, elicitation, tools=ALL_TOOLS, url_action: str = "accept") -> dict:
    """Run the SDK client once; ``elicitation`` is the declared capability value (None: not declared)."""
    capability = "none" if elicitation is None else json.dumps(elicitation)
    done = subprocess.run(
        [node, str(SCRIPT), live.mcp_url, live.token, capability, ",".join(tools), url_action],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"node exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no report from the Node client:\n{done.stdout}\n{done.stderr}"
    report = json.loads(lines[-1])
    assert "fatal" not in report, report["fatal"]
    assert report["sdkVersion"] == SDK_VERSION
    # What the SDK put on the wire is exactly the capability under test.
    sent = report["initializeSent"]["capabilities"]
    assert sent == ({} if elicitation is None else {"elicitation": elicitation}), sent
    assert report["negotiatedProtocolVersion"] == "2025-11-25"
    assert set(report["calls"]) == set(tools)
    return report


def tool_result(report: dict, name: str) -> dict:
    call = report["calls"][name]
    assert "error" not in call, f"{name} ended with a JSON-RPC error: {call['error']}"
    return call["result"]


def assert_no_url_mode(report: dict) -> None:
    """No URL-mode elicitation/create and no -32042 reached the client."""
    assert [e for e in report["elicitations"] if e["mode"] == "url" or e["url"]] == []
    assert [h for h in report["handled"] if h["mode"] == "url"] == []
    errors = [call["error"] for call in report["calls"].values() if "error" in call]
    assert [e for e in errors if e["code"] == URL_ELICITATION_REQUIRED] == []
    assert errors == []
    assert URL_ELICITATION_REQUIRED not in [a["error"]["code"] for a in report["answers"] if a["error"]]
    assert [n for n in report["notifications"] if n["method"].startswith("notifications/elicitation")] == []


def assert_tool_error_naming_connections(report: dict, live: Live, name: str, what: str) -> None:
    result = tool_result(report, name)
    assert result["isError"] is True, result
    assert what in result["text"], result["text"]
    assert f"Sign in at {live.connections_url} to do it there" in result["text"], result["text"]
    assert not any(e["during"] == name for e in report["elicitations"]), report["elicitations"]


@pytest.mark.parametrize("elicitation", [{}, {"form": {}}], ids=["elicitation-empty", "form-only"])
def test_form_only_clients_never_see_url_mode(node, live, elicitation):
    report = run_client(node, live, elicitation)

    # Form mode works: one elicitation/create (mode "form", as the session negotiated
    # 2025-11-25), answered by the SDK handler with {name: "Ada"}.
    ask = tool_result(report, "ask_name")
    assert ask == {"isError": False, "text": "Hello, Ada!"}
    assert len(report["elicitations"]) == 1, report["elicitations"]
    form = report["elicitations"][0]
    assert form["during"] == "ask_name"
    assert form["modeOnWire"] == "form"
    assert form["message"] == "What is your name?"
    assert form["requestedSchema"]["required"] == ["name"]
    assert [h["mode"] for h in report["handled"]] == ["form"]
    assert [r["method"] for r in report["serverRequests"]] == ["elicitation/create"]

    # URL mode is gated: tool errors that say where to go instead, never -32042 or mode "url".
    assert_tool_error_naming_connections(
        report, live, "demo_profile", "This tool needs your Demo provider (this site) account connected."
    )
    assert_tool_error_naming_connections(
        report, live, "set_api_key", "This tool needs a value you must type on this site's secure page."
    )
    assert_no_url_mode(report)

    # set_api_key's request waits on the user's connections page: bound to no session, never sent
    assert list(Elicitation.objects.filter(mode=Elicitation.Mode.URL).values_list("kind", "session_id")) == [
        (Elicitation.Kind.SECRET, None)
    ]
    assert list(Elicitation.objects.filter(mode=Elicitation.Mode.FORM).values_list("status", "content")) == [
        (Elicitation.Status.ACCEPTED, {"name": "Ada"})
    ]


def test_url_capable_client_gets_url_mode(node, live):
    """Positive control: the same calls with ``url`` declared do get -32042 and mode "url"."""
    # The URL request of set_api_key is declined: accepting it would make the tool wait
    # (up to 10 minutes) for the user to finish on the page.
    report = run_client(node, live, {"form": {}, "url": {}}, url_action="decline")

    assert tool_result(report, "ask_name") == {"isError": False, "text": "Hello, Ada!"}

    error = report["calls"]["demo_profile"].get("error")
    assert error is not None, report["calls"]["demo_profile"]
    assert error["code"] == URL_ELICITATION_REQUIRED
    assert error["name"] == "UrlElicitationRequiredError"
    (link,) = error["data"]["elicitations"]
    assert link["mode"] == "url"
    connect = Elicitation.objects.get(mode=Elicitation.Mode.URL, kind=Elicitation.Kind.CONNECT)
    assert link["elicitationId"] == connect.elicitation_id
    assert link["url"] == connect.url and link["url"].startswith(live.base + "/elicitation/")

    url_requests = [e for e in report["elicitations"] if e["mode"] == "url"]
    assert len(url_requests) == 1, report["elicitations"]
    assert url_requests[0]["during"] == "set_api_key" and url_requests[0]["modeOnWire"] == "url"
    secret = Elicitation.objects.get(mode=Elicitation.Mode.URL, kind=Elicitation.Kind.SECRET)
    assert url_requests[0]["url"] == secret.url
    assert [h["answer"] for h in report["handled"] if h["mode"] == "url"] == [{"action": "decline"}]
    assert tool_result(report, "set_api_key") == {
        "isError": False,
        "text": "You did not open the page; nothing was stored.",
    }
    secret.refresh_from_db()
    assert secret.status == Elicitation.Status.DECLINED


def test_client_without_elicitation_gets_nothing(node, live):
    report = run_client(node, live, None)

    ask = tool_result(report, "ask_name")
    assert ask["isError"] is True
    assert "did not declare the elicitation capability" in ask["text"], ask["text"]
    assert_tool_error_naming_connections(
        report, live, "demo_profile", "This tool needs your Demo provider (this site) account connected."
    )
    assert_tool_error_naming_connections(
        report, live, "set_api_key", "This tool needs a value you must type on this site's secure page."
    )
    assert report["elicitations"] == [] and report["serverRequests"] == [] and report["handled"] == []
    assert_no_url_mode(report)
    assert list(Elicitation.objects.values_list("mode", "kind", "session_id")) == [("url", "secret", None)]
