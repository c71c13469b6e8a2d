"""Hostile tests of URL-mode elicitation (SEP-1036): the start page, the third-party callback, the
secure input page, the MCP side (forged answers, capability gating), the tokens (C5), malicious
third-party providers, the rate limit, ``/api/profile`` and ``ensure_demo_provider``.

Checklist section 3.3 (C1-C9) and the DESIGN.md invariants. Every test asserts the correct
behaviour; the findings of the first hostile review (a hostile provider's answers crashing the
callback, unbounded provider reads, NUL characters reaching PostgreSQL, /api/profile with a
user-less token, the provider's error text reflected) are fixed and their tests are plain tests.

Set-up (copied from tests/elicitation/test_service.py, not imported, so edits there do not break this):
Django's test client with ``BASE_URL = https://site.example``; the ``demo`` provider from
``ensure_demo_provider`` where the provider is this site; and :class:`MockProvider`, a hostile
third-party authorization server served with ``http.server`` on loopback in a thread, whose token
and account endpoints answer whatever a test scripts.

PostgreSQL refuses NUL characters in text; on SQLite the fixture ``postgres_text_rules`` makes the
connection refuse them the same way (``DataError``), so those findings show on both back ends
(run the file with ``DATABASE_URL=postgres://…`` to see the real thing).
"""

from __future__ import annotations

import base64
import io
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DataError, connection
from django.test import Client
from django.utils import timezone

from elicitation.models import Elicitation, StoredSecret, ThirdPartyConnection, ThirdPartyProvider
from elicitation.tasks import notify_elicitation_complete
from elicitation.url_mode import complete_elicitation, create_url_elicitation, supports_url
from elicitation.views import SESSION_KEY
from mcp_oauth.mcp_server.transport.sessions import end_session
from mcp_oauth.models import AuditEvent, McpSession, McpSessionEvent
from tests.support.elicitation_helpers import (
    PASSWORD,
    SITE,
    URL_CAPS,
    demo_provider,
    open_session,
    outbox,
    path_of,
    query_of,
    refresh,
    s256,
    start_authorization,
)

COMPLETE = "notifications/elicitation/complete"
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
SECURITY_HEADERS = {"X-Frame-Options": "DENY", "Cache-Control": "no-store", "Referrer-Policy": "same-origin"}


@pytest.fixture(autouse=True)
def _url_elicitation_site(settings):
    """Fresh Fernet key; an https BASE_URL; a short provider timeout (the hostile provider sleeps)."""
    settings.ELICITATION = {"ENCRYPTION_KEYS": [Fernet.generate_key().decode()], "HTTP_TIMEOUT_SECONDS": 1.0}
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": SITE, "SSE_POLL_INTERVAL_SECONDS": 0.01}


# --- helpers (copied) -------------------------------------------------------------------------------


@pytest.fixture
def provider(db, _url_elicitation_site):
    return demo_provider()


@pytest.fixture
def session(user, public_app, resource):
    return open_session(user, public_app, resource)


def connect_request(user, session, provider="demo", **extra) -> Elicitation:
    return create_url_elicitation(
        user=user,
        session=session,
        message="Connect your account to continue.",
        kind="connect",
        provider=provider,
        **extra,
    )


def secret_request(user, session, name="demo_api_key") -> Elicitation:
    return create_url_elicitation(
        user=user, session=session, message="Enter your API key.", kind="secret", secret_name=name
    )


def external_request(user, session, target="https://pay.example/checkout") -> Elicitation:
    return create_url_elicitation(user=user, session=session, message="Pay.", kind="external", target_url=target)


def browser(user=None, **kwargs) -> Client:
    client = Client(raise_request_exception=False, **kwargs)
    if user is not None:
        client.force_login(user)
    return client


def callback_path(slug="demo", **params) -> str:
    return f"/elicitation/callback/{slug}/?" + urlencode(params, doseq=True)


def assert_secure(response) -> None:
    for header, value in SECURITY_HEADERS.items():
        assert response[header] == value, (header, response.status_code)
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]


def mcp_post(client: Client, token: str, message: Any, session_id: str | None = None, raw: bytes | None = None):
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    if session_id:
        headers["Mcp-Session-Id"] = session_id
    body = raw if raw is not None else json.dumps(message)
    return client.post("/mcp", body, content_type="application/json", headers=headers)


def mcp_initialize(client: Client, token: str, capabilities: Any, protocol_version: str = "2025-11-25") -> str:
    params = {
        "protocolVersion": protocol_version,
        "clientInfo": {"name": "hostile", "version": "1"},
        "capabilities": capabilities,
    }
    response = mcp_post(client, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    assert response.status_code == 200, response.content
    return response["Mcp-Session-Id"]


def call_tool(client: Client, token: str, session_id: str, name: str) -> dict:
    response = mcp_post(
        client,
        token,
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": name, "arguments": {}}},
        session_id,
    )
    assert response.status_code == 200, response.content
    return response.json()


def answer(row: Elicitation, action: str = "decline", rid: Any = None) -> dict:
    return {"jsonrpc": "2.0", "id": rid or f"elicitation-{row.elicitation_id}", "result": {"action": action}}


@pytest.fixture
def postgres_text_rules():
    """Make SQLite refuse NUL in text parameters like PostgreSQL does (a no-op on PostgreSQL)."""
    if connection.vendor == "postgresql":
        yield
        return

    def refuse_nul(execute, sql, params, many, context):
        rows = params if many else [params]
        for row in rows or []:
            values = row.values() if isinstance(row, dict) else (row or [])
            if any(isinstance(value, str) and "\x00" in value for value in values):
                raise DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(refuse_nul):
        yield


# --- a hostile third-party authorization server on loopback -----------------------------------------


Route = Callable[["_Handler"], None]


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):  # quiet
        pass

    def _serve(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("latin-1") if length else ""
        mock = self.server.mock
        mock.requests.append(
            {"method": self.command, "path": self.path, "headers": dict(self.headers.items()), "body": body}
        )
        route = mock.routes.get(urlsplit(self.path).path)
        if route is None:
            self.send_response(404)
            self.end_headers()
            return
        try:
            route(self)
        except (BrokenPipeError, ConnectionResetError):
            pass

    do_GET = do_POST = _serve

    # building blocks for routes
    def reply(
        self, status: int, body: bytes | str, content_type: str = "application/json", headers: dict | None = None
    ):
        data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.server.mock.count(self.path, len(data))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    mock: MockProvider


class MockProvider:
    """Scripted token / account / revocation endpoints. ``requests`` logs everything received;
    ``sent`` counts body bytes actually written per path."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[dict] = []
        self.sent: dict[str, int] = {}
        self._lock = threading.Lock()
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.mock = self
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.token(good_token_response())
        self.userinfo({"sub": "3p-1", "email": "mallory@evil.example"})
        self.routes["/revoke"] = lambda h: h.reply(200, "{}")

    def count(self, path: str, n: int) -> None:
        with self._lock:
            key = urlsplit(path).path
            self.sent[key] = self.sent.get(key, 0) + n

    def json_route(self, path: str, payload: Any, status: int = 200) -> None:
        text = payload if isinstance(payload, (str, bytes)) else json.dumps(payload)
        self.routes[path] = lambda h: h.reply(status, text)

    def token(self, payload: Any, status: int = 200) -> None:
        self.json_route("/token", payload, status)

    def userinfo(self, payload: Any, status: int = 200) -> None:
        self.json_route("/userinfo", payload, status)

    def hits(self, path: str) -> list[dict]:
        return [r for r in self.requests if urlsplit(r["path"]).path == path]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def good_token_response(**overrides) -> dict:
    payload = {
        "access_token": "3P-ACCESS-TOKEN-aaaaaaaaaaaaaaaa",
        "token_type": "Bearer",
        "expires_in": 3600,
        "refresh_token": "3P-REFRESH-TOKEN-bbbbbbbbbbbbbbbb",
        "scope": "read",
    }
    payload.update(overrides)
    return {k: v for k, v in payload.items() if v is not ...}


@pytest.fixture
def mock_provider():
    mock = MockProvider()
    yield mock
    mock.close()


def hostile_provider(mock: MockProvider, slug: str = "evil", **fields) -> ThirdPartyProvider:
    base = mock.base
    values = dict(
        name="Evil Corp",
        issuer=base,
        authorization_endpoint=f"{base}/authorize",
        token_endpoint=f"{base}/token",
        userinfo_endpoint=f"{base}/userinfo",
        revocation_endpoint=f"{base}/revoke",
        client_id="site-client-at-evil",
        token_endpoint_auth_method="client_secret_basic",
        scopes="read",
        iss_parameter_supported=False,
    )
    values.update(fields)
    provider = ThirdPartyProvider(slug=slug, **values)
    provider.client_secret = "SITE-CLIENT-SECRET-at-evil-0123456789"
    provider.save()
    return provider


@pytest.fixture
def evil(db, mock_provider):
    return hostile_provider(mock_provider)


def run_connect(client: Client, row: Elicitation, *, code: str = "the-code", **extra):
    """Continue on the start page, then come back to the callback as the provider would."""
    state = start_authorization(client, row)
    return client.get(callback_path(row.provider.slug, code=code, state=state, **extra))


# =====================================================================================================
# 1. Identity (C6, C7): another user, OAuth CSRF, account switch, session fixation, login CSRF
# =====================================================================================================


def _make(kind: str, user, session) -> Elicitation:
    if kind == "connect":
        return connect_request(user, session)
    if kind == "secret":
        return secret_request(user, session)
    return external_request(user, session)


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["connect", "secret", "external"])
@pytest.mark.parametrize(
    ("method", "data"),
    [
        ("get", None),
        ("head", None),
        ("post", {"action": "continue"}),
        ("post", {"action": "cancel"}),
        ("post", {"action": "save", "value": "bob-typed-this"}),
        ("post", {}),
    ],
)
def test_another_user_gets_403_for_every_method_and_kind_and_nothing_changes(
    user, other_user, provider, session, kind, method, data, django_capture_on_commit_callbacks
):
    row = _make(kind, user, session)
    client = browser(other_user)
    with django_capture_on_commit_callbacks(execute=True):
        response = (
            getattr(client, method)(path_of(row), data) if data is not None else getattr(client, method)(path_of(row))
        )
    assert response.status_code == 403
    assert_secure(response)
    row = refresh(row)
    assert (row.status, row.completed_at, row.notified_at, row.user) == ("pending", None, None, user)
    assert SESSION_KEY not in client.session and not StoredSecret.objects.exists()
    assert outbox(session) == []
    event = AuditEvent.objects.get()
    assert (event.kind, event.user, event.detail["expected_user"]) == ("identity.mismatch", other_user, user.pk)


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["get", "head"])
def test_the_owner_viewing_the_start_page_sets_no_state(user, provider, session, method):
    """C2: the state exists only after the user approved the interstitial (POST continue)."""
    row = connect_request(user, session)
    client = browser(user)
    assert getattr(client, method)(path_of(row)).status_code == 200
    assert SESSION_KEY not in client.session
    assert getattr(client, method)(path_of(row) + "?action=continue").status_code == 200
    assert SESSION_KEY not in client.session and refresh(row).status == "pending"


@pytest.mark.django_db
def test_victim_cannot_be_made_to_finish_an_authorization_the_attacker_started(
    user, other_user, public_app, resource, evil, mock_provider
):
    """OAuth CSRF: bob starts a connection for his own elicitation, consents at the provider with his
    third-party account, and sends the callback link (his code, his state) to alice. Alice's session
    never held that state: 400, the code is not redeemed, nothing is bound to anyone."""
    bobs_session = open_session(other_user, public_app, resource)
    bobs_row = connect_request(other_user, bobs_session, provider="evil")
    bob = browser(other_user)
    state = start_authorization(bob, bobs_row)
    alice = browser(user)
    alices_row = connect_request(user, open_session(user, public_app, resource), provider="evil")
    start_authorization(alice, alices_row)  # alice even has an authorization of her own pending
    response = alice.get(callback_path("evil", code="bobs-code", state=state))
    assert response.status_code == 400
    assert mock_provider.hits("/token") == []
    assert not ThirdPartyConnection.objects.exists()
    assert (refresh(bobs_row).status, refresh(alices_row).status) == ("pending", "pending")
    assert state in bob.session[SESSION_KEY]  # bob's own pending authorization is untouched


@pytest.mark.django_db
def test_switching_account_in_the_same_browser_drops_the_pending_state(user, other_user, evil, mock_provider, session):
    """alice continues, then the same browser signs in as bob (django.contrib.auth flushes the session
    on a user change): alice's state is gone, the callback cannot finish as bob."""
    row = connect_request(user, session, provider="evil")
    client = browser(user)
    state = start_authorization(client, row)
    client.force_login(other_user)
    response = client.get(callback_path("evil", code="c", state=state))
    assert response.status_code == 400
    assert mock_provider.hits("/token") == [] and not ThirdPartyConnection.objects.exists()
    assert refresh(row).status == "pending"


@pytest.mark.django_db
def test_an_anonymous_state_planted_before_login_is_useless_after_login(user, evil, mock_provider, session):
    """Session fixation: a pending authorization planted in an anonymous session (user None) does
    not survive as alice's: the login rotates the session key and the callback checks the user."""
    row = connect_request(user, session, provider="evil")
    client = browser()
    store = client.session
    store[SESSION_KEY] = {
        "fixed": {
            "provider": "evil",
            "elicitation": row.elicitation_id,
            "verifier": "v" * 43,
            "user": None,
            "scopes": ["read"],
            "at": time.time(),
        }
    }
    store.save()
    fixed_key = store.session_key
    page = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    response = client.post(
        "/accounts/login/", {"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": token}
    )
    assert response.status_code == 302
    assert client.session.session_key != fixed_key
    response = client.get(callback_path("evil", code="c", state="fixed"))
    assert response.status_code == 403
    assert mock_provider.hits("/token") == [] and not ThirdPartyConnection.objects.exists()


@pytest.mark.django_db
def test_login_form_refuses_a_cross_site_post(user):
    """Login CSRF (logging the victim into the attacker's account, then letting them connect their
    third-party account to it) needs a forged login POST: refused without the CSRF token."""
    client = Client(enforce_csrf_checks=True)
    response = client.post("/accounts/login/", {"username": "alice", "password": PASSWORD})
    assert response.status_code == 403
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
@pytest.mark.parametrize(
    "target", ["https://evil.example/", "//evil.example/", "/\\evil.example", "https:evil.example"]
)
def test_login_next_is_not_an_open_redirect(user, target):
    client = Client()
    page = client.get("/accounts/login/?" + urlencode({"next": target}))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    response = client.post(
        "/accounts/login/?" + urlencode({"next": target}),
        {"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": token, "next": target},
    )
    assert response.status_code == 302
    assert urlsplit(response["Location"]).netloc == "" and not response["Location"].startswith("//")


@pytest.mark.django_db
def test_start_page_login_redirect_stays_on_this_site(user, provider, session):
    row = connect_request(user, session)
    response = browser().get(path_of(row) + "?next=https://evil.example/")
    assert response.status_code == 302
    location = response["Location"]
    assert location.startswith("/accounts/login/?next=")
    assert query_of(location)["next"].startswith(path_of(row))


# =====================================================================================================
# 2. Link tampering
# =====================================================================================================


def _tampered(row: Elicitation) -> list[str]:
    eid = row.elicitation_id
    return [
        f"/elicitation/{eid.swapcase()}/",
        f"/elicitation/{eid[:-1]}/",
        f"/elicitation/{eid}x/",
        f"/elicitation/{eid}%20/",
        f"/elicitation/%20{eid}/",
        f"/elicitation/elicitation-{eid}/",
        f"/elicitation/{eid}/..%2F/",
        f"/elicitation/..%2F{eid}/",
        f"/elicitation/{eid}%2F/",
        f"/elicitation/{eid}",
        "/elicitation/" + "a" * 65 + "/",
        "/elicitation/" + "a" * 5000 + "/",
        "/elicitation/%C3%A9%F0%9F%98%80/",
        "/elicitation/%ED%A0%80/",
        "/elicitation/%FF%FE/",
        "/elicitation/..%2F..%2Fadmin/",
        "/elicitation/%2e%2e/",
        "/elicitation/callback/",
        f"/elicitation/{eid}%0D%0ASet-Cookie:x=1/",
        f"/elicitation/{eid};x=1/",
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["get", "post"])
def test_tampered_links_are_404_for_the_owner_and_never_500(user, provider, session, method):
    row = connect_request(user, session)
    client = browser(user)
    for path in _tampered(row):
        response = getattr(client, method)(path, {"action": "continue"} if method == "post" else None)
        assert response.status_code in (301, 404, 405), (path, response.status_code)
        if response.status_code == 301:  # APPEND_SLASH to the same, still-invalid path
            assert response["Location"].endswith("/")
    assert refresh(row).status == "pending" and SESSION_KEY not in client.session
    assert not AuditEvent.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/elicitation/%00/", "/elicitation/a%00b/"])
def test_nul_in_the_link_is_404_not_500(user, postgres_text_rules, path):
    assert browser(user).get(path).status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("status", ["completed", "cancelled", "declined", "expired", "accepted", "invalid"])
def test_finished_secret_links_store_nothing(user, session, status):
    row = secret_request(user, session)
    Elicitation.objects.filter(pk=row.pk).update(status=status)
    client = browser(user)
    for data in ({"action": "save", "value": "late-value"}, {"action": "cancel"}):
        assert client.post(path_of(row), data).status_code == 404
    assert not StoredSecret.objects.exists() and refresh(row).status == status


@pytest.mark.django_db
def test_an_expired_secret_link_stores_nothing_even_with_the_form_open(user, session):
    row = secret_request(user, session)
    client = browser(user)
    assert client.get(path_of(row)).status_code == 200
    Elicitation.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert client.post(path_of(row), {"action": "save", "value": "late-value"}).status_code == 404
    assert not StoredSecret.objects.exists() and refresh(row).status == "expired"


@pytest.mark.django_db
def test_form_mode_ids_are_not_links(user, session):
    row = Elicitation.objects.create(
        mode="form",
        kind="secret",
        secret_name="k",
        message="Name?",
        user=user,
        session=session,
        expires_at=timezone.now() + timedelta(minutes=5),
    )
    client = browser(user)
    assert client.get(f"/elicitation/{row.elicitation_id}/").status_code == 404
    assert client.post(f"/elicitation/{row.elicitation_id}/", {"action": "save", "value": "x"}).status_code == 404
    assert client.post(f"/elicitation/{row.elicitation_id}/", {"action": "cancel"}).status_code == 404
    assert refresh(row).status == "pending" and not StoredSecret.objects.exists()


# =====================================================================================================
# 3. The callback: state, iss (mix-up, C3), injected parameters, open redirect (C4)
# =====================================================================================================


@pytest.mark.django_db
def test_callback_does_not_reflect_error_or_error_description(user, evil, session):
    row = connect_request(user, session, provider="evil")
    client = browser(user)
    state = start_authorization(client, row)
    payload = "<script>alert('xss')</script>"
    response = client.get(
        callback_path(
            "evil",
            state=state,
            error=payload,
            error_description=payload + " call +1-555",
            error_uri="https://evil.example/help",
        )
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert (
        "<script>alert" not in html
        and "alert(" not in html
        and "+1-555" not in html
        and "evil.example/help" not in html
    )
    row = refresh(row)
    assert (row.status, row.error) == ("failed", "provider: invalid error code")
    assert "Evil Corp did not connect your account: Evil Corp answered with an error (invalid error code)." in html


@pytest.mark.django_db
@pytest.mark.parametrize("code", ["server_error\n", "access_denied\n"])
def test_callback_error_code_with_a_trailing_newline_is_not_a_code(user, evil, session, code):
    """Attack: ``$`` in a ``re.match`` pattern also matches before a final newline, so
    ``error=server_error%0A`` was stored (and shown, and sent to the MCP client) as the code
    ``"server_error\n"``. A code is a plain token or it is not one."""
    row = connect_request(user, session, provider="evil")
    client = browser(user)
    state = start_authorization(client, row)
    response = client.get(callback_path("evil", state=state, error=code))
    assert response.status_code == 200
    row = refresh(row)
    assert (row.status, row.error) == ("failed", "provider: invalid error code")
    assert "\n" not in row.error


@pytest.mark.django_db
def test_callback_error_with_nul_is_not_a_500(user, evil, session, postgres_text_rules):
    row = connect_request(user, session, provider="evil")
    client = browser(user)
    state = start_authorization(client, row)
    response = client.get(callback_path("evil", state=state, error="access_denied\x00"))
    assert response.status_code in (200, 400)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "params",
    [
        pytest.param({"code": ["a", "b"]}, id="code-twice"),
        pytest.param({"iss": ["https://evil.example", "ISS"]}, id="iss-twice-foreign-first"),
        pytest.param({"error": ["access_denied", "server_error"]}, id="error-twice"),
        pytest.param({"code": "c", "error": "access_denied"}, id="code-and-error"),
        pytest.param({"code": "x" * 2001}, id="code-too-long"),
        pytest.param({"code": "x" * 100_000}, id="code-100k"),
        pytest.param({"code": ""}, id="code-empty"),
        pytest.param({"code": "c\r\nX-Injected: 1"}, id="code-crlf"),
        pytest.param(
            {
                "code": "c",
                "state_extra": "1",
                "next": "https://redirect-target.example/",
                "redirect_uri": "https://redirect-target.example/",
            },
            id="redirect-params",
        ),
    ],
)
def test_callback_odd_parameters_never_500_nor_redirect(user, evil, mock_provider, session, params):
    row = connect_request(user, session, provider="evil")
    client = browser(user)
    state = start_authorization(client, row)
    params = {
        k: (v.replace("ISS", evil.issuer) if isinstance(v, str) else [x.replace("ISS", evil.issuer) for x in v])
        for k, v in params.items()
    }
    response = client.get(callback_path("evil", state=state, **params))
    assert response.status_code in (200, 400, 502), response.status_code
    assert not (300 <= response.status_code < 400)
    assert_secure(response)
    assert "redirect-target.example" not in response.content.decode()
    for hit in mock_provider.hits("/token"):
        assert "\r" not in hit["body"] and "X-Injected" not in hit["headers"]  # form-encoded, never a header
        assert len(parse_qs(hit["body"])["code"][0]) <= 2000


@pytest.mark.django_db
def test_state_in_the_query_twice_uses_one_and_keeps_the_other_single_use(user, evil, mock_provider, session):
    row = connect_request(user, session, provider="evil")
    client = browser(user)
    first, second = start_authorization(client, row), start_authorization(client, row)
    response = client.get(callback_path("evil", code="c", state=[first, second]))
    assert response.status_code == 200
    assert len(mock_provider.hits("/token")) == 1
    assert client.get(callback_path("evil", code="c", state=second)).status_code == 400


@pytest.mark.django_db
def test_callback_is_get_only(user, evil, session):
    row = connect_request(user, session, provider="evil")
    client = browser(user)
    state = start_authorization(client, row)
    assert client.post(callback_path("evil"), {"code": "c", "state": state}).status_code in (403, 405)
    assert state in client.session[SESSION_KEY]


@pytest.mark.django_db
def test_mix_up_a_code_for_one_provider_is_never_sent_to_another(user, session, mock_provider):
    """Two providers (C3). A state issued for `alpha` arriving at `beta`'s callback, or with `beta`'s
    iss, is refused before any token request; `alpha`'s code only ever goes to alpha."""
    beta_mock = MockProvider()
    try:
        alpha = hostile_provider(mock_provider, slug="alpha", iss_parameter_supported=True)
        beta = hostile_provider(beta_mock, slug="beta", iss_parameter_supported=True)
        row = connect_request(user, session, provider="alpha")
        client = browser(user)
        state = start_authorization(client, row)
        assert client.get(callback_path("beta", code="c", state=state, iss=beta.issuer)).status_code == 400
        state = start_authorization(client, row)
        assert client.get(callback_path("alpha", code="c", state=state, iss=beta.issuer)).status_code == 400
        state = start_authorization(client, row)
        assert client.get(callback_path("alpha", code="c", state=state)).status_code == 400  # iss required
        assert mock_provider.hits("/token") == [] and beta_mock.hits("/token") == []
        state = start_authorization(client, row)
        assert client.get(callback_path("alpha", code="c", state=state, iss=alpha.issuer + "/")).status_code == 200
        assert len(mock_provider.hits("/token")) == 1 and beta_mock.hits("/token") == []
    finally:
        beta_mock.close()


@pytest.mark.django_db
def test_callback_state_for_a_connections_page_flow_cannot_complete_an_elicitation(user, evil, session, mock_provider):
    row = connect_request(user, session, provider="evil")
    client = browser(user)
    response = client.post("/elicitation/connections/", {"action": "connect", "provider": "evil"})
    state = query_of(response["Location"])["state"]
    done = client.get(callback_path("evil", code="c", state=state))
    assert done.status_code in (200, 303)
    if done.status_code == 303:  # back to the connections page: a fixed local path, never a parameter
        assert done["Location"] == "/elicitation/connections/"
    assert ThirdPartyConnection.objects.get().user == user
    assert refresh(row).status == "pending"  # the elicitation is completed only by its own flow


# =====================================================================================================
# 4. CSRF, clickjacking, caching on every page and outcome
# =====================================================================================================


@pytest.mark.django_db
def test_every_state_changing_post_needs_the_csrf_token(user, provider, session, evil):
    connect_row, secret_row = connect_request(user, session), secret_request(user, session)
    ThirdPartyConnection.objects.create(user=user, provider=evil, access_token_encrypted="x")
    client = browser(user, enforce_csrf_checks=True)
    attempts = [
        (path_of(connect_row), {"action": "continue"}),
        (path_of(connect_row), {"action": "cancel"}),
        (path_of(secret_row), {"action": "save", "value": "v"}),
        (path_of(secret_row), {"action": "cancel"}),
        ("/elicitation/connections/", {"action": "connect", "provider": "demo"}),
        ("/elicitation/connections/", {"action": "disconnect", "provider": "evil"}),
    ]
    for path, data in attempts:
        response = client.post(path, data, headers={"Origin": "https://evil.example"})
        assert response.status_code == 403, path
    assert (refresh(connect_row).status, refresh(secret_row).status) == ("pending", "pending")
    assert SESSION_KEY not in client.session and not StoredSecret.objects.exists()
    assert ThirdPartyConnection.objects.count() == 1


@pytest.mark.django_db
def test_security_headers_on_every_outcome(settings, user, other_user, provider, session, evil, mock_provider):
    connect_row, secret_row = connect_request(user, session), secret_request(user, session)
    client = browser(user)
    responses = [
        client.get(path_of(connect_row)),
        client.head(path_of(connect_row)),
        client.get(path_of(secret_row)),
        client.get("/elicitation/unknown/"),
        browser().get(path_of(connect_row)),
        browser(other_user).get(path_of(connect_row)),
        client.post(path_of(connect_row), {"action": "nope"}),
        client.post(path_of(secret_row), {"action": "save", "value": ""}),
        client.post(path_of(connect_row), {"action": "continue"}),
        client.get(callback_path(code="c", state="nope")),
        client.get("/elicitation/connections/"),
        browser().get("/elicitation/connections/"),
        browser().get("/accounts/login/?next=" + path_of(connect_row)),
    ]
    mock_provider.token({"error": "invalid_grant"}, status=400)
    evil_row = connect_request(user, session, provider="evil")
    responses.append(run_connect(client, evil_row))  # 502
    responses.append(client.post(path_of(secret_row), {"action": "save", "value": "v"}))  # done
    settings.ELICITATION = {**settings.ELICITATION, "ENCRYPTION_KEYS": []}
    responses.append(client.post(path_of(connect_row), {"action": "continue"}))  # 503
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "THROTTLE_RATES": {"elicitation": "1/minute"}}
    responses.append(browser().get("/elicitation/connections/"))
    responses.append(browser().get("/elicitation/connections/"))  # 429
    statuses = sorted({r.status_code for r in responses})
    assert statuses == [200, 302, 303, 400, 403, 404, 429, 502, 503]
    for response in responses:
        assert_secure(response)


# =====================================================================================================
# 5. The secure input page: hostile values, never echoed / logged / audited / shown
# =====================================================================================================


@pytest.fixture
def admin_browser(db, django_user_model):
    admin = django_user_model.objects.create_superuser("root", "root@example.com", PASSWORD)
    return browser(admin)


def admin_pages(client: Client) -> str:
    """Every admin page of the elicitation app (lists and change views) and the audit log, as text."""
    from django.apps import apps

    html = []
    for model_name in ("elicitation", "thirdpartyprovider", "thirdpartyconnection", "storedsecret"):
        model = apps.get_model("elicitation", model_name)
        response = client.get(f"/admin/elicitation/{model_name}/")
        assert response.status_code == 200, model_name
        html.append(response.content.decode())
        for pk in model.objects.values_list("pk", flat=True):
            response = client.get(f"/admin/elicitation/{model_name}/{pk}/change/")
            assert response.status_code == 200, (model_name, pk)
            html.append(response.content.decode())
    response = client.get("/admin/mcp_oauth/auditevent/")
    if response.status_code == 200:
        html.append(response.content.decode())
        for pk in AuditEvent.objects.values_list("pk", flat=True):
            html.append(client.get(f"/admin/mcp_oauth/auditevent/{pk}/change/").content.decode())
    return "\n".join(html)


SECRET_MARKER = "sk-LIVE-9f8e7d6c5b4a"


@pytest.mark.django_db
def test_a_stored_secret_is_never_echoed_logged_audited_or_shown_in_the_admin(user, session, caplog, admin_browser):
    caplog.set_level(logging.DEBUG)
    row = secret_request(user, session)
    client = browser(user)
    value = f"<b>{SECRET_MARKER}</b>'\"&"
    rejected = client.post(path_of(row), {"action": "save", "value": value + "\nsecond line"})
    assert rejected.status_code == 400 and SECRET_MARKER not in rejected.content.decode()
    saved = client.post(path_of(row), {"action": "save", "value": value})
    assert saved.status_code == 200 and SECRET_MARKER not in saved.content.decode()
    assert StoredSecret.objects.get().value == value
    assert SECRET_MARKER not in StoredSecret.objects.get().value_encrypted
    assert SECRET_MARKER not in caplog.text
    assert all(SECRET_MARKER not in json.dumps(e.detail) for e in AuditEvent.objects.all())
    assert SECRET_MARKER not in json.dumps(
        list(Elicitation.objects.values("message", "error", "content", "client_answer"))
    )
    assert SECRET_MARKER not in admin_pages(admin_browser)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        pytest.param(
            urlencode({"action": "save", "value": "x" * 1_000_000}), "application/x-www-form-urlencoded", id="1MB"
        ),
        pytest.param(
            urlencode({"action": "save", "value": "x" * 3_000_000}), "application/x-www-form-urlencoded", id="3MB"
        ),
        pytest.param("action=save&value=%ED%A0%80abc", "application/x-www-form-urlencoded", id="lone-surrogate-bytes"),
        pytest.param("action=save&value=%FF%FEabc", "application/x-www-form-urlencoded", id="invalid-utf8"),
        pytest.param("action=save&value=abc&value=def", "application/x-www-form-urlencoded", id="value-twice"),
        pytest.param("action=save&action=cancel&value=abc", "application/x-www-form-urlencoded", id="action-twice"),
        pytest.param("action=save&value=%E2%80%AEabc", "application/x-www-form-urlencoded", id="bidi-override"),
        pytest.param(json.dumps({"action": "save", "value": "abc"}), "application/json", id="json-body"),
        pytest.param("&&&=&=", "application/x-www-form-urlencoded", id="garbage"),
        pytest.param(
            "action=save&" + "&".join(f"f{i}=1" for i in range(1200)),
            "application/x-www-form-urlencoded",
            id="too-many-fields",
        ),
    ],
)
def test_hostile_secret_bodies_never_500(user, session, body, content_type):
    row = secret_request(user, session)
    response = browser(user).post(path_of(row), body, content_type=content_type)
    assert response.status_code in (200, 400), response.status_code
    for secret in StoredSecret.objects.all():
        assert "\x00" not in secret.value and len(secret.value) <= 4096
        secret.value.encode("utf-8")


# =====================================================================================================
# 6. The MCP side: forged answers, malformed responses, completion only to the asking session (C9)
# =====================================================================================================


@pytest.fixture
def alice_mcp(user, public_app, resource, provider, mint_token):
    client, token = Client(raise_request_exception=False), mint_token(user, public_app, resource=resource.uri)
    session_id = mcp_initialize(client, token, URL_CAPS)
    return client, token, McpSession.objects.get(pk=session_id)


@pytest.mark.django_db
def test_another_user_cannot_answer_or_decline_someone_elses_elicitation(
    alice_mcp, other_user, public_app, resource, mint_token
):
    client, alice_token, alice_session = alice_mcp
    url_row = connect_request(alice_session.user, alice_session, send=True)
    form_row = Elicitation.objects.create(
        mode="form",
        message="Name?",
        user=alice_session.user,
        session=alice_session,
        request_id="4",
        expires_at=timezone.now() + timedelta(minutes=5),
    )
    bob_token = mint_token(other_user, public_app, resource=resource.uri)
    bob_session = mcp_initialize(client, bob_token, URL_CAPS)
    for row in (url_row, form_row):
        # bob, in his own session
        assert mcp_post(client, bob_token, answer(row, "decline"), bob_session).status_code == 202
        # bob, naming alice's session
        assert mcp_post(client, bob_token, answer(row, "decline"), alice_session.pk).status_code == 404
    # alice's other session (same user, another client instance)
    other_alice = mcp_initialize(client, alice_token, URL_CAPS)
    for row in (url_row, form_row):
        assert mcp_post(client, alice_token, answer(row, "decline"), other_alice).status_code == 202
        row = refresh(row)
        assert (row.status, row.client_answer) == ("pending", None)
    assert outbox(alice_session)[1:] == []  # only the elicitation/create


@pytest.mark.django_db(transaction=True)  # on PostgreSQL a failing receiver must not poison the test's transaction
@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": "ID", "result": "decline"},
        {"jsonrpc": "2.0", "id": "ID", "result": None},
        {"jsonrpc": "2.0", "id": "ID", "result": []},
        {"jsonrpc": "2.0", "id": "ID", "error": "nope"},
        {"jsonrpc": "2.0", "id": "ID", "error": {"code": "x", "message": "m"}},
        {"jsonrpc": "2.0", "id": "ID", "error": {"code": 10**40, "message": "m"}},
        {"jsonrpc": "2.0", "id": "ID", "error": {"code": -1, "message": {"nested": "m"}, "data": [1] * 100}},
        {"jsonrpc": "2.0", "id": "ID", "result": {"action": "decline"}, "error": {"code": 1, "message": "m"}},
        {"jsonrpc": "2.0", "id": ["ID"], "result": {"action": "decline"}},
        {"jsonrpc": "2.0", "id": {"x": "ID"}, "result": {"action": "decline"}},
        {"jsonrpc": "2.0", "id": True, "result": {"action": "decline"}},
        {"jsonrpc": "2.0", "id": 1.5, "result": {"action": "decline"}},
        {"jsonrpc": "2.0", "id": None, "result": {"action": "decline"}},
        {"jsonrpc": "2.0", "id": None, "error": {"code": 1, "message": "m"}},
        {"jsonrpc": "2.0", "id": "ID" + "x" * 10_000, "result": {"action": "decline"}},
        {"jsonrpc": "2.0", "id": "ID", "result": {"action": ["decline"]}},
        {"jsonrpc": "2.0", "id": "ID", "result": {"action": "decline\x00"}},
        {"jsonrpc": "2.0", "id": "ID\x00", "result": {"action": "decline"}},
        {"jsonrpc": "1.0", "id": "ID", "result": {"action": "decline"}},
        {"id": "ID", "result": {"action": "decline"}},
        [{"jsonrpc": "2.0", "id": "ID", "result": {"action": "decline"}}],
    ],
)
def test_malformed_answers_never_500_and_never_finish_anything(alice_mcp, message):
    client, token, session = alice_mcp
    row = connect_request(session.user, session, send=True)
    rid = f"elicitation-{row.elicitation_id}"
    raw = json.dumps(message).replace('"ID', '"' + rid).encode()
    response = mcp_post(client, token, None, session.pk, raw=raw)
    assert response.status_code in (202, 400), (response.status_code, response.content[:300])
    assert refresh(row).status == "pending"


@pytest.mark.django_db(transaction=True)
def test_a_valid_answer_with_hostile_strings_is_not_a_500(alice_mcp):
    """On PostgreSQL jsonb refuses \\u0000 and lone surrogates: the answer is dropped (logged), never a 500."""
    client, token, session = alice_mcp
    row = connect_request(session.user, session, send=True)
    raw = (
        '{"jsonrpc":"2.0","id":"elicitation-%s","result":{"action":"decline","x":"\\ud800","y":"\\u0000"}}'
        % row.elicitation_id
    ).encode()
    assert mcp_post(client, token, None, session.pk, raw=raw).status_code == 202
    assert refresh(row).status in ("declined", "pending")


@pytest.mark.django_db
def test_an_answer_flood_keeps_only_the_first_answer(alice_mcp):
    client, token, session = alice_mcp
    row = connect_request(session.user, session, send=True)
    assert mcp_post(client, token, answer(row, "accept"), session.pk).status_code == 202
    for action in ["decline", "cancel"] * 20:
        assert mcp_post(client, token, answer(row, action), session.pk).status_code == 202
    row = refresh(row)
    assert (row.status, row.client_answer["result"]) == ("pending", {"action": "accept"})


@pytest.mark.django_db
def test_a_json_rpc_answer_cannot_finish_a_32042_elicitation(alice_mcp):
    """A ``-32042`` link was never sent as ``elicitation/create``: an "answer" to it changes nothing."""
    client, token, session = alice_mcp
    row = connect_request(session.user, session, request_id=5)
    assert mcp_post(client, token, answer(row, "decline"), session.pk).status_code == 202
    assert refresh(row).status == "pending"
    assert browser(session.user).get(path_of(row)).status_code == 200


@pytest.mark.django_db
def test_complete_elicitation_refuses_expired_finished_form_and_foreign_ids(
    user, other_user, provider, session, django_capture_on_commit_callbacks
):
    expired, cancelled, mine = (
        connect_request(user, session),
        connect_request(user, session),
        connect_request(user, session),
    )
    Elicitation.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    Elicitation.objects.filter(pk=cancelled.pk).update(status="cancelled")
    form = Elicitation.objects.create(
        mode="form", message="Name?", user=user, session=session, expires_at=timezone.now() + timedelta(minutes=5)
    )
    with django_capture_on_commit_callbacks(execute=True):
        for eid in (
            expired.elicitation_id,
            cancelled.elicitation_id,
            form.elicitation_id,
            "",
            "x" * 65,
            expired.elicitation_id.swapcase(),
            f"elicitation-{mine.elicitation_id}",
        ):
            assert complete_elicitation(eid) is False
        assert complete_elicitation(mine.elicitation_id, user=other_user) is False
        assert complete_elicitation(None) is False  # type: ignore[arg-type]
        assert complete_elicitation(["x"]) is False  # type: ignore[arg-type]
    assert outbox(session) == []
    assert [refresh(r).status for r in (expired, cancelled, form, mine)] == [
        "pending",
        "cancelled",
        "pending",
        "pending",
    ]
    assert notify_elicitation_complete(form.pk) == "not-finished"
    Elicitation.objects.filter(pk=form.pk).update(status="accepted")
    assert notify_elicitation_complete(form.pk) == "not-finished" and outbox(session) == []


@pytest.mark.django_db
def test_completion_goes_only_to_the_asking_session_never_to_a_successor(
    user, other_user, public_app, resource, provider, django_capture_on_commit_callbacks
):
    asking, sibling = open_session(user, public_app, resource), open_session(user, public_app, resource)
    bobs = open_session(other_user, public_app, resource)
    row = secret_request(user, asking)
    with django_capture_on_commit_callbacks(execute=True):
        assert browser(user).post(path_of(row), {"action": "save", "value": "v"}).status_code == 200
    assert outbox(asking) == [{"jsonrpc": "2.0", "method": COMPLETE, "params": {"elicitationId": row.elicitation_id}}]
    assert outbox(sibling) == [] and outbox(bobs) == []
    # the asking session ended before completion: nobody else is told, not even a new session of the user
    ended = open_session(user, public_app, resource)
    late = secret_request(user, ended, name="late")
    end_session(ended)
    successor = open_session(user, public_app, resource)
    with django_capture_on_commit_callbacks(execute=True):
        assert browser(user).post(path_of(late), {"action": "save", "value": "v"}).status_code == 200
    assert refresh(late).status == "completed"
    assert outbox(successor) == [] and outbox(sibling) == [] and outbox(ended) == []


# =====================================================================================================
# 7. Capability gating: only a declared ``elicitation.url`` object on 2025-11-25 gets URL mode
# =====================================================================================================


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("capabilities", "version"),
    [
        ({"elicitation": {"url": "yes"}}, "2025-11-25"),
        ({"elicitation": {"url": None}}, "2025-11-25"),
        ({"elicitation": {"url": []}}, "2025-11-25"),
        ({"elicitation": {"url": True}}, "2025-11-25"),
        ({"elicitation": []}, "2025-11-25"),
        ({"elicitation": "url"}, "2025-11-25"),
        ({"elicitation": {"URL": {}}}, "2025-11-25"),
        ({"elicitation": {"form": {"url": {}}}}, "2025-11-25"),
        ({"url": {}}, "2025-11-25"),
        ({"experimental": {"elicitation": {"url": {}}}}, "2025-11-25"),
        ({"elicitation": {"url": {}}}, "2025-06-18"),
        ({"elicitation": {"url": {}}}, "2025-03-26"),
    ],
)
def test_capability_gating_through_the_endpoint(
    user, public_app, resource, provider, mint_token, capabilities, version
):
    client, token = Client(raise_request_exception=False), mint_token(user, public_app, resource=resource.uri)
    params = {
        "protocolVersion": version,
        "clientInfo": {"name": "hostile", "version": "1"},
        "capabilities": capabilities,
    }
    init = mcp_post(client, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    assert init.status_code == 200
    if "error" in init.json():
        return  # refused at initialize: never URL mode either
    session_id = init["Mcp-Session-Id"]
    assert (
        supports_url(
            McpSession.objects.get(pk=session_id).client_capabilities,
            McpSession.objects.get(pk=session_id).protocol_version,
        )
        is False
    )
    for tool in ("demo_profile", "set_api_key"):
        body = call_tool(client, token, session_id, tool)
        assert "error" not in body and body["result"]["isError"] is True, body
    # nothing is bound to this session or sent to it; a secret request may wait on the connections page only
    assert not Elicitation.objects.filter(session_id=session_id).exists()
    assert not Elicitation.objects.exclude(kind="secret", session__isnull=True).exists()
    assert outbox(McpSession.objects.get(pk=session_id)) == []


# =====================================================================================================
# 8. Tokens (C1, C5, R6, R7): the full flow against a provider that records everything it receives
# =====================================================================================================


@pytest.mark.django_db(transaction=True)  # the tool runs in a thread of its own (sync_to_async)
def test_full_flow_keeps_every_token_server_side(
    user, public_app, resource, mint_token, mock_provider, caplog, admin_browser, django_capture_on_commit_callbacks
):
    caplog.set_level(logging.DEBUG)
    hostile_provider(mock_provider, slug="demo", scopes="profile")
    mock_provider.token(good_token_response(scope="profile"))
    mock_provider.userinfo({"sub": "3p-1", "email": "alice@3p.example", "echo": "profile-data"})
    mcp_client, mcp_token = Client(raise_request_exception=False), mint_token(user, public_app, resource=resource.uri)
    session_id = mcp_initialize(mcp_client, mcp_token, URL_CAPS)

    body = call_tool(mcp_client, mcp_token, session_id, "demo_profile")
    link = body["error"]["data"]["elicitations"][0]["url"]
    assert body["error"]["code"] == -32042
    row = Elicitation.objects.get()
    for private in (user.username, user.email, session_id, mcp_token):
        assert private not in link  # C8

    alice = browser(user)
    continued = alice.post(urlsplit(link).path, {"action": "continue"})
    authorize = query_of(continued["Location"])
    with django_capture_on_commit_callbacks(execute=True):
        done = alice.get(callback_path("demo", code="code-from-provider", state=authorize["state"]))
    assert done.status_code == 200 and "alice@3p.example" in done.content.decode()

    (token_request,) = mock_provider.hits("/token")
    form = parse_qs(token_request["body"])
    assert form["grant_type"] == ["authorization_code"] and form["code"] == ["code-from-provider"]
    assert (
        authorize["code_challenge_method"] == "S256" and s256(form["code_verifier"][0]) == authorize["code_challenge"]
    )  # C1
    assert form["redirect_uri"] == [f"{SITE}/elicitation/callback/demo/"]
    expected_basic = base64.b64encode(b"site-client-at-evil:SITE-CLIENT-SECRET-at-evil-0123456789").decode()
    assert token_request["headers"]["Authorization"] == f"Basic {expected_basic}"
    (userinfo_request,) = mock_provider.hits("/userinfo")
    assert userinfo_request["headers"]["Authorization"] == "Bearer 3P-ACCESS-TOKEN-aaaaaaaaaaaaaaaa"

    assert refresh(row).status == "completed"
    result = call_tool(mcp_client, mcp_token, session_id, "demo_profile")
    assert result["result"]["isError"] is False
    assert result["result"]["structuredContent"]["profile"]["echo"] == "profile-data"
    # refresh on use: the refresh request carries the third-party refresh token only
    ThirdPartyConnection.objects.update(expires_at=timezone.now() - timedelta(minutes=5))
    mock_provider.token(good_token_response(access_token="3P-ACCESS-TOKEN-2-cccccccccccccc", scope="profile"))
    assert call_tool(mcp_client, mcp_token, session_id, "demo_profile")["result"]["isError"] is False
    refresh_request = mock_provider.hits("/token")[-1]
    assert parse_qs(refresh_request["body"])["refresh_token"] == ["3P-REFRESH-TOKEN-bbbbbbbbbbbbbbbb"]
    assert mock_provider.hits("/userinfo")[-1]["headers"]["Authorization"] == "Bearer 3P-ACCESS-TOKEN-2-cccccccccccccc"
    # disconnect: revocation at the provider with the third-party tokens
    assert alice.post("/elicitation/connections/", {"action": "disconnect", "provider": "demo"}).status_code == 303
    assert mock_provider.hits("/revoke")

    # C5 / R6: the MCP token never went to the provider
    for hit in mock_provider.requests:
        assert mcp_token not in json.dumps(hit), hit["path"]
    # C5 / R7: third-party tokens, the client secret and the MCP token never reach the MCP client, logs,
    # audit, pages or the admin
    secrets_ = [
        "3P-ACCESS-TOKEN-aaaaaaaaaaaaaaaa",
        "3P-REFRESH-TOKEN-bbbbbbbbbbbbbbbb",
        "3P-ACCESS-TOKEN-2-cccccccccccccc",
        "SITE-CLIENT-SECRET-at-evil-0123456789",
        form["code_verifier"][0],
        mcp_token,
    ]
    seen = {
        "tool results": json.dumps([body, result]),
        "logs": caplog.text,
        "audit": json.dumps([e.detail for e in AuditEvent.objects.all()]),
        "done page": done.content.decode(),
        "connections page": alice.get("/elicitation/connections/").content.decode(),
        "admin": admin_pages(admin_browser),
        "outbox": json.dumps(outbox(McpSession.objects.get(pk=session_id))),
        "elicitation rows": json.dumps(list(Elicitation.objects.values("message", "error", "client_answer", "scopes"))),
    }
    for where, text in seen.items():
        for secret in secrets_:
            assert secret not in text, (where, secret[:12])


@pytest.mark.django_db
def test_the_mcp_token_and_the_third_party_token_are_not_interchangeable(
    user, public_app, resource, provider, mint_token
):
    """The demo provider is this very site: its tokens (resource <site>/api) must not open /mcp,
    and MCP tokens must not open /api/profile."""
    from project.apps import ensure_api_resource

    api = ensure_api_resource()
    mcp_token = mint_token(user, public_app, resource=resource.uri, scope="mcp profile")
    api_token = mint_token(user, public_app, resource=api.uri, scope="profile")
    client = Client(raise_request_exception=False)
    assert client.get("/api/profile", headers={"Authorization": f"Bearer {mcp_token}"}).status_code == 401
    assert client.get(f"/api/profile?access_token={api_token}").status_code == 401
    assert client.get("/api/profile", headers={"Authorization": f"Bearer {api_token}"}).status_code == 200
    response = mcp_post(
        client,
        api_token,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "x", "version": "1"},
            },
        },
    )
    assert response.status_code == 401
    no_scope = mint_token(user, public_app, resource=api.uri, scope="mcp")
    assert client.get("/api/profile", headers={"Authorization": f"Bearer {no_scope}"}).status_code == 403


@pytest.fixture
def api_cc_token(db, public_app, mint_token):
    from project.apps import ensure_api_resource

    api = ensure_api_resource()
    return mint_token(None, public_app, resource=api.uri, scope="profile")  # what the client_credentials grant issues


@pytest.mark.django_db
def test_api_profile_with_a_client_credentials_token_is_not_a_500(api_cc_token):
    response = Client(raise_request_exception=False).get(
        "/api/profile", headers={"Authorization": f"Bearer {api_cc_token}"}
    )
    assert response.status_code in (401, 403, 404)


@pytest.mark.django_db
def test_api_profile_never_answers_the_cookie_user_for_a_userless_token(user, api_cc_token):
    response = browser(user).get("/api/profile", headers={"Authorization": f"Bearer {api_cc_token}"})
    assert user.email not in response.content.decode()


# =====================================================================================================
# 9. A hostile token endpoint: nothing 500s, nothing hangs, stored values are sane
# =====================================================================================================


def _redirect(h: _Handler) -> None:
    h.reply(301, b"", headers={"Location": h.server.mock.base + "/token2"})


def _slow(seconds: float) -> Route:
    def route(h: _Handler) -> None:
        time.sleep(seconds)
        h.reply(200, json.dumps(good_token_response()))

    return route


REFUSED_TOKEN_RESPONSES = {
    "html": (200, "<html><body>hi</body></html>"),
    "json-array": (200, json.dumps([good_token_response()])),
    "json-string": (200, json.dumps("3P-ACCESS")),
    "empty-200": (200, ""),
    "token-type-mac": (200, json.dumps(good_token_response(token_type="mac"))),
    "token-type-missing": (200, json.dumps(good_token_response(token_type=...))),
    "token-type-list": (200, json.dumps(good_token_response(token_type=["Bearer"]))),
    "access-token-int": (200, json.dumps(good_token_response(access_token=123))),
    "access-token-list": (200, json.dumps(good_token_response(access_token=["a"]))),
    "access-token-empty": (200, json.dumps(good_token_response(access_token=""))),
    "access-token-null": (200, json.dumps(good_token_response(access_token=None))),
    "error-400": (400, json.dumps({"error": "invalid_grant"})),
    "error-in-200": (200, json.dumps({**good_token_response(), "error": "invalid_grant"})),
    "error-not-string": (400, json.dumps({"error": {"x": 1}})),
    "500-html": (500, "<h1>down</h1>"),
    "just-under-64k": (200, json.dumps({**good_token_response(), "pad": "x" * (64 * 1024 - 200)})),
    "deep-json-over-64k": (200, "[" * 100_000 + "]" * 100_000),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", sorted(REFUSED_TOKEN_RESPONSES))
def test_bad_token_responses_are_502_and_store_nothing(user, session, evil, mock_provider, case):
    status, body = REFUSED_TOKEN_RESPONSES[case]
    mock_provider.token(body, status=status)
    row = connect_request(user, session, provider="evil")
    response = run_connect(browser(user), row)
    if case == "just-under-64k":  # a valid answer that is merely large
        assert response.status_code == 200
        return
    assert response.status_code == 502, response.status_code
    assert_secure(response)
    # issue #28: the failure is terminal (told at once), with the code only
    row = refresh(row)
    assert not ThirdPartyConnection.objects.exists() and row.status == "failed"
    assert row.error in ("provider: invalid_grant", "provider: invalid_response", "provider: server_error")


@pytest.mark.django_db
def test_a_redirecting_token_endpoint_is_not_followed(user, session, evil, mock_provider):
    mock_provider.routes["/token"] = _redirect
    mock_provider.json_route("/token2", good_token_response())
    response = run_connect(browser(user), connect_request(user, session, provider="evil"))
    assert response.status_code == 502
    assert mock_provider.hits("/token2") == [] and not ThirdPartyConnection.objects.exists()


@pytest.mark.django_db
def test_a_token_endpoint_slower_than_the_timeout_is_502_in_time(user, session, evil, mock_provider):
    mock_provider.routes["/token"] = _slow(4)
    started = time.monotonic()
    response = run_connect(browser(user), connect_request(user, session, provider="evil"))
    assert response.status_code == 502 and time.monotonic() - started < 3
    assert not ThirdPartyConnection.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("overrides", "scopes", "expiry"),
    [
        pytest.param({"scope": ["read", "admin"]}, "read", "1h", id="scope-list"),
        pytest.param({"scope": 7}, "read", "1h", id="scope-int"),
        pytest.param({"scope": "read " + "s" * 1000}, None, "1h", id="scope-long"),
        pytest.param({"scope": "<script>alert(1)</script>"}, "<script>alert(1)</script>", "1h", id="scope-html"),
        pytest.param({"expires_in": "3600"}, "read", None, id="expires-in-string"),
        pytest.param({"expires_in": True}, "read", None, id="expires-in-bool"),
        pytest.param({"expires_in": 10**12}, "read", "10y", id="expires-in-huge"),
        pytest.param({"expires_in": 0.5}, "read", "0s", id="expires-in-half-second"),
        pytest.param({"refresh_token": 42}, "read", "1h", id="refresh-token-int"),
        pytest.param({"refresh_token": ...}, "read", "1h", id="no-refresh-token"),
        pytest.param({"token_type": "BEARER"}, "read", "1h", id="token-type-case"),
        pytest.param({"extra": {"nested": ["x"] * 1000}}, "read", "1h", id="extra-members"),
    ],
)
def test_odd_but_usable_token_responses_are_stored_sanely(
    user, session, evil, mock_provider, overrides, scopes, expiry
):
    mock_provider.token(good_token_response(**overrides))
    response = run_connect(browser(user), connect_request(user, session, provider="evil"))
    assert response.status_code == 200
    connection = ThirdPartyConnection.objects.get()
    assert connection.token_type == "Bearer" and connection.access_token == "3P-ACCESS-TOKEN-aaaaaaaaaaaaaaaa"
    assert isinstance(connection.refresh_token, str) and len(connection.scopes) <= 500
    if scopes is not None:
        assert connection.scopes == scopes
    now = timezone.now()
    if expiry is None:
        assert connection.expires_at is None
    elif expiry == "1h":
        assert now + timedelta(minutes=59) < connection.expires_at < now + timedelta(minutes=61)
    elif expiry == "10y":
        assert now + timedelta(days=3640) < connection.expires_at < now + timedelta(days=3660)
    else:
        assert connection.expires_at <= now + timedelta(seconds=1)
    assert "<script>" not in browser(user).get("/elicitation/connections/").content.decode()


CRASHING_TOKEN_RESPONSES = {
    "deep-json-under-64k": "[" * 30_000 + "]" * 30_000,
    "expires-in-NaN": '{"access_token":"a","token_type":"Bearer","expires_in":NaN}',
    "expires-in-10e400-int": '{"access_token":"a","token_type":"Bearer","expires_in":1' + "0" * 400 + "}",
    "lone-surrogate-in-scope": '{"access_token":"a","token_type":"Bearer","scope":"read \\ud800"}',
    "lone-surrogate-in-access-token": '{"access_token":"a\\ud800","token_type":"Bearer"}',
    "lone-surrogate-in-refresh-token": '{"access_token":"a","token_type":"Bearer","refresh_token":"r\\udfff"}',
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", sorted(CRASHING_TOKEN_RESPONSES))
def test_token_responses_that_crash_the_callback(user, session, evil, mock_provider, case):
    mock_provider.token(CRASHING_TOKEN_RESPONSES[case])
    response = run_connect(browser(user), connect_request(user, session, provider="evil"))
    assert response.status_code in (200, 502)


@pytest.mark.django_db
def test_nul_in_the_granted_scope_is_not_a_500(user, session, evil, mock_provider, postgres_text_rules):
    mock_provider.token('{"access_token":"a","token_type":"Bearer","scope":"read\\u0000admin"}')
    assert run_connect(browser(user), connect_request(user, session, provider="evil")).status_code in (200, 502)


@pytest.mark.django_db
def test_refresh_with_a_crashing_answer_is_a_provider_error(user, evil, mock_provider):
    from elicitation.providers import ProviderError, fresh_access_token

    connection = ThirdPartyConnection(user=user, provider=evil, expires_at=timezone.now() - timedelta(minutes=5))
    connection.access_token, connection.refresh_token = "old", "refresh"
    connection.save()
    mock_provider.token('{"access_token":"a","token_type":"Bearer","expires_in":NaN}')
    try:
        fresh_access_token(connection)
    except ProviderError:
        pass


# --- size and total time of provider answers (requests reads everything, timeouts are per read) -----


def _huge(size: int, content_type: str = "application/json") -> Route:
    def route(h: _Handler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(size))
        h.end_headers()
        chunk = b"x" * 65536
        left = size
        try:
            while left > 0:
                piece = chunk[: min(len(chunk), left)]
                h.wfile.write(piece)
                h.server.mock.count(h.path, len(piece))
                left -= len(piece)
        finally:
            h.server.mock.finished.set()

    return route


def _drip(total_seconds: float, step: float = 0.25) -> Route:
    def route(h: _Handler) -> None:
        body = json.dumps(good_token_response()).encode()
        pad = int(total_seconds / step)
        data = b" " * pad + body  # leading whitespace is valid JSON
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        for i in range(pad):
            h.wfile.write(data[i : i + 1])
            h.wfile.flush()
            time.sleep(step)
        h.wfile.write(data[pad:])

    return route


@pytest.mark.django_db
def test_a_huge_token_answer_is_not_read_whole(user, session, evil, mock_provider):
    mock_provider.finished = threading.Event()
    mock_provider.routes["/token"] = _huge(40 * 1024 * 1024)
    response = run_connect(browser(user), connect_request(user, session, provider="evil"))
    assert response.status_code == 502
    mock_provider.finished.wait(5)
    assert mock_provider.sent.get("/token", 0) < 16 * 1024 * 1024


@pytest.mark.django_db
def test_a_huge_userinfo_answer_is_not_read_whole(user, session, evil, mock_provider):
    mock_provider.finished = threading.Event()
    mock_provider.routes["/userinfo"] = _huge(40 * 1024 * 1024)
    response = run_connect(browser(user), connect_request(user, session, provider="evil"))
    assert response.status_code == 200
    mock_provider.finished.wait(5)
    assert mock_provider.sent.get("/userinfo", 0) < 16 * 1024 * 1024


@pytest.mark.django_db
def test_a_dripping_token_endpoint_cannot_hold_the_callback_past_the_timeout(user, session, evil, mock_provider):
    mock_provider.routes["/token"] = _drip(5)
    started = time.monotonic()
    response = run_connect(browser(user), connect_request(user, session, provider="evil"))
    elapsed = time.monotonic() - started
    assert response.status_code in (200, 502)
    assert elapsed < 3, f"the callback took {elapsed:.1f}s with HTTP_TIMEOUT_SECONDS=1"


# --- the provider's error text on our page and in our log -------------------------------------------


@pytest.mark.django_db
def test_the_502_page_escapes_the_providers_error(user, session, evil, mock_provider):
    mock_provider.token({"error": "<img src=x onerror=alert(1)>"}, status=400)
    response = run_connect(browser(user), connect_request(user, session, provider="evil"))
    assert response.status_code == 502
    html = response.content.decode()
    assert "<img src=x" not in html and "img src=x" not in html and "onerror" not in html
    assert "Evil Corp answered with an error (invalid error code)." in html
    assert refresh(Elicitation.objects.get()).error == "provider: invalid error code"


@pytest.mark.django_db
def test_the_providers_error_text_is_not_reflected_or_logged_verbatim(user, session, evil, mock_provider, caplog):
    caplog.set_level(logging.WARNING)
    spoof = "Account locked.\nCall +1-555-0100 and read out your password"
    mock_provider.token({"error": spoof}, status=400)
    response = run_connect(browser(user), connect_request(user, session, provider="evil"))
    assert response.status_code == 502
    assert "+1-555-0100" not in response.content.decode()
    assert "\nCall +1-555" not in caplog.text


@pytest.mark.django_db
def test_a_lone_surrogate_in_the_providers_error_is_not_a_500(user, session, evil, mock_provider):
    mock_provider.token('{"error":"bad\\ud800"}', status=400)
    assert run_connect(browser(user), connect_request(user, session, provider="evil")).status_code == 502


# =====================================================================================================
# 10. A hostile account (userinfo) endpoint: the label is escaped everywhere, odd answers are harmless
# =====================================================================================================


XSS_LABEL = "<script>alert('label')</script>@evil.example"


@pytest.mark.django_db
def test_an_html_account_label_is_escaped_on_every_page(user, session, evil, mock_provider, admin_browser):
    mock_provider.userinfo({"email": XSS_LABEL})
    done = run_connect(browser(user), connect_request(user, session, provider="evil"))
    assert done.status_code == 200
    assert ThirdPartyConnection.objects.get().account_label == XSS_LABEL
    pages = [
        done.content.decode(),
        browser(user).get("/elicitation/connections/").content.decode(),
        admin_pages(admin_browser),
    ]
    for html in pages:
        assert "<script>alert('label')" not in html


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("route", "label"),
    [
        pytest.param(lambda h: h.reply(200, "<html>me</html>", "text/html"), "", id="html"),
        pytest.param(lambda h: h.reply(200, "[1, 2]"), "", id="json-array"),
        pytest.param(lambda h: h.reply(401, json.dumps({"email": "x@evil.example"})), "", id="401-with-json"),
        pytest.param(lambda h: h.reply(301, b"", headers={"Location": "http://127.0.0.1:9/"}), "", id="redirect"),
        pytest.param(
            lambda h: h.reply(200, json.dumps({"email": ["a"], "name": 5, "sub": "s-1"})), "s-1", id="non-string-claims"
        ),
        pytest.param(lambda h: h.reply(200, json.dumps({"email": "e" * 10_000})), "e" * 200, id="long-email"),
        pytest.param(
            lambda h: h.reply(200, json.dumps({"email": "   ", "login": "\u202egnp.exe"})), "\u202egnp.exe", id="bidi"
        ),
        pytest.param(lambda h: (time.sleep(3), h.reply(200, "{}")), "", id="slow"),
        pytest.param(lambda h: h.reply(200, "[" * 30_000 + "]" * 30_000), "", id="deep-json"),
    ],
)
def test_odd_account_answers_never_break_the_connection(user, session, evil, mock_provider, route, label):
    mock_provider.routes["/userinfo"] = route
    started = time.monotonic()
    response = run_connect(browser(user), connect_request(user, session, provider="evil"))
    assert response.status_code == 200 and time.monotonic() - started < 3
    assert ThirdPartyConnection.objects.get().account_label == label


@pytest.mark.django_db
def test_a_lone_surrogate_in_the_account_label_is_not_a_500(user, session, evil, mock_provider):
    mock_provider.userinfo('{"email":"me\\ud800@evil.example"}')
    assert run_connect(browser(user), connect_request(user, session, provider="evil")).status_code == 200


@pytest.mark.django_db
def test_a_nul_in_the_account_label_is_not_a_500(user, session, evil, mock_provider, postgres_text_rules):
    mock_provider.userinfo('{"email":"me\\u0000@evil.example"}')
    assert run_connect(browser(user), connect_request(user, session, provider="evil")).status_code == 200


@pytest.mark.django_db
def test_tool_and_admin_supplied_text_is_escaped_on_the_pages(user, session, mock_provider):
    hostile_provider(mock_provider, slug="html", name="<b>Evil</b><script>p()</script>")
    row = create_url_elicitation(
        user=user,
        session=session,
        kind="connect",
        provider="html",
        message="<script>m()</script> click <a href=https://evil.example>here</a>",
    )
    html = browser(user).get(path_of(row)).content.decode()
    assert "<script>m()" not in html and "<script>p()" not in html and "<a href=https://evil.example" not in html


# =====================================================================================================
# 11. Rate limiting of the pages (scope "elicitation", 60/minute per IP)
# =====================================================================================================


@pytest.mark.django_db
def test_the_pages_are_rate_limited_with_429_and_retry_after(user, provider, session, steady_throttle_clock):
    row = connect_request(user, session)
    client = browser(user)
    statuses = [client.get(path_of(row)).status_code for _ in range(60)]
    assert statuses == [200] * 60
    for response in (
        client.get(path_of(row)),
        client.get(callback_path(code="c", state="s")),
        client.get("/elicitation/connections/"),
        client.post(path_of(row), {"action": "cancel"}),
        client.get("/elicitation/unknown-id/"),
    ):
        assert response.status_code == 429
        assert 1 <= int(response["Retry-After"]) <= 61
        assert_secure(response)
    assert refresh(row).status == "pending"  # the throttled cancel did nothing
    other_ip = browser(user, REMOTE_ADDR="198.51.100.7")
    assert other_ip.get(path_of(row)).status_code == 200


@pytest.mark.django_db
def test_forged_forwarding_headers_do_not_escape_the_rate_limit(user, provider, session, steady_throttle_clock):
    row = connect_request(user, session)
    client = browser(user)
    for i in range(60):
        client.get(path_of(row), headers={"X-Forwarded-For": f"203.0.113.{i}", "X-Real-IP": f"203.0.113.{i}"})
    response = client.get(path_of(row), headers={"X-Forwarded-For": "203.0.113.250", "X-Real-IP": "203.0.113.250"})
    assert response.status_code == 429


# =====================================================================================================
# 12. The connections page and ensure_demo_provider
# =====================================================================================================


@pytest.mark.django_db
@pytest.mark.parametrize(
    "data",
    [
        {"action": ["connect", "disconnect"], "provider": "demo"},
        {"action": "connect", "provider": "x" * 10_000},
        {"action": "disconnect", "provider": "demo"},
        {"action": "connect", "provider": "DEMO"},
        {"provider": "demo"},
    ],
)
def test_connections_page_odd_posts_never_500(user, provider, data):
    response = browser(user).post("/elicitation/connections/", data)
    assert response.status_code in (303, 400), response.status_code


@pytest.mark.django_db
@pytest.mark.parametrize("data", [{"action": "connect", "provider": "demo\x00"}, {"action": "forget", "name": "k\x00"}])
def test_connections_page_nul_fields_are_not_a_500(user, provider, postgres_text_rules, data):
    assert browser(user).post("/elicitation/connections/", data).status_code in (303, 400)


@pytest.mark.django_db
def test_connections_page_lists_and_forgets_only_the_users_own_things(user, other_user, public_app, resource, provider):
    alices = secret_request(user, open_session(user, public_app, resource), name="alice_key")
    bobs = secret_request(other_user, open_session(other_user, public_app, resource), name="bob_key")
    for owner, name in ((user, "alice_key"), (other_user, "bob_key")):
        stored = StoredSecret(user=owner, name=name)
        stored.value = f"value-of-{name}"
        stored.save()
    bob = browser(other_user)
    html = bob.get("/elicitation/connections/").content.decode()
    assert bobs.elicitation_id in html and alices.elicitation_id not in html
    assert "bob_key" in html and "alice_key" not in html and "value-of-" not in html
    # bob names alice's value: nothing happens to it
    assert bob.post("/elicitation/connections/", {"action": "forget", "name": "alice_key"}).status_code == 303
    assert StoredSecret.objects.filter(user=user, name="alice_key").exists()
    assert (
        browser(other_user, enforce_csrf_checks=True)
        .post("/elicitation/connections/", {"action": "forget", "name": "bob_key"})
        .status_code
        == 403
    )
    assert StoredSecret.objects.filter(user=other_user, name="bob_key").exists()


@pytest.mark.django_db
def test_disconnecting_only_touches_the_users_own_connection(user, other_user, evil, mock_provider):
    bobs = ThirdPartyConnection(user=other_user, provider=evil)
    bobs.access_token = "BOBS-TOKEN"
    bobs.save()
    assert (
        browser(user).post("/elicitation/connections/", {"action": "disconnect", "provider": "evil"}).status_code == 303
    )
    assert ThirdPartyConnection.objects.get().user == other_user and mock_provider.hits("/revoke") == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    "arguments",
    [
        ["--issuer", "http://evil.example", "--client-id", "c", "--client-secret", "s" * 20],
        ["--issuer", "javascript:alert(1)//", "--client-id", "c", "--client-secret", "s" * 20],
        ["--issuer", "https://user:pw@evil.example", "--client-id", "c", "--client-secret", "s" * 20],
        ["--issuer", "https://provider.example"],
        ["--issuer", "https://provider.example", "--client-id", "c"],
    ],
)
def test_ensure_demo_provider_refuses_unsafe_or_incomplete_input(db, arguments):
    with pytest.raises(CommandError):
        call_command("ensure_demo_provider", *arguments, stdout=io.StringIO())
    assert not ThirdPartyProvider.objects.exists()


@pytest.mark.django_db
def test_ensure_demo_provider_is_idempotent_and_prints_no_secret(db):
    from oauth2_provider.models import get_application_model

    out = io.StringIO()
    call_command("ensure_demo_provider", stdout=out)
    first = ThirdPartyProvider.objects.get(slug="demo").client_secret
    call_command("ensure_demo_provider", stdout=out)
    provider = ThirdPartyProvider.objects.get(slug="demo")
    assert provider.client_secret != first  # rotated: the old secret is no longer the provider's
    assert get_application_model().objects.filter(client_id="demo-provider-client").count() == 1
    assert ThirdPartyProvider.objects.count() == 1
    assert first not in out.getvalue() and provider.client_secret not in out.getvalue()
    assert provider.client_secret not in provider.client_secret_encrypted
    assert (
        provider.use_pkce
        and provider.iss_parameter_supported
        and provider.token_endpoint_auth_method == "client_secret_basic"
    )


@pytest.mark.django_db
def test_a_session_less_secret_request_is_still_bound_to_its_user(user, other_user, django_capture_on_commit_callbacks):
    """A secret request made for a client without URL mode waits on the connections page (no MCP
    session): only its user may open it, and finishing it notifies nobody."""
    row = Elicitation.objects.create(
        mode="url",
        kind="secret",
        secret_name="k",
        message="Key?",
        user=user,
        session=None,
        expires_at=timezone.now() + timedelta(minutes=5),
    )
    assert browser(other_user).post(path_of(row), {"action": "save", "value": "bobs"}).status_code == 403
    assert not StoredSecret.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        assert browser(user).post(path_of(row), {"action": "save", "value": "mine"}).status_code == 200
    assert StoredSecret.objects.get().user == user and refresh(row).notified_at is None
    assert not McpSessionEvent.objects.exists()
