"""URL-mode elicitation (SEP-1036, MCP 2025-11-25 "Elicitation" / "URL Mode") at the Django level.

Capability gating, ``create_url_elicitation``, ``-32042`` through the MCP endpoint, the start page,
the third-party callback, the secure input page, the connections page, the Celery tasks, refresh
on use, and answers that reach another worker.

Two set-ups:

* unit tests (``django_db``) talk to the site through Django's test client, with
  ``BASE_URL = https://site.example`` (not conftest's ``http://testserver``: URL elicitation refuses
  plain http off loopback, and the provider's URL fields refuse a host without a dot) and the
  ``demo`` provider created by ``ensure_demo_provider`` (its endpoints on this same site);
* live tests (``django_db(transaction=True)``, fixture ``live_site``) serve the project with uvicorn
  on loopback; the third-party provider is this project's own authorization server, reached over
  real HTTP by the callback's code exchange, by refresh and by revocation. The user's browser is an
  ``httpx2.Client`` that logs in with the site's login form and reads forms with ``forms_of``.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from datetime import timedelta
from types import SimpleNamespace
from typing import Any
from urllib.parse import urljoin

import httpx2
import pytest
import requests
from asgiref.sync import async_to_sync
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from elicitation.models import Elicitation, ThirdPartyConnection, ThirdPartyProvider
from elicitation.providers import fresh_access_token
from elicitation.signals import record_client_answer
from elicitation.tasks import cleanup, expire_elicitations
from elicitation.url_mode import (
    ConnectedAccount,
    UrlElicitationRequired,
    create_url_elicitation,
    require_connection,
)
from mcp_oauth.mcp_server.tools import ToolContext
from mcp_oauth.mcp_server.transport.sessions import end_session
from mcp_oauth.models import AuditEvent, McpSession
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.elicitation_helpers import (
    FORM_CAPS,
    PASSWORD,
    SITE,
    URL_CAPS,
    demo_provider,
    open_session,
    outbox,
    path_of,
    query_of,
    refresh,
)
from tests.support.live import forms_of, free_port, run_asgi_server

PROVIDER_NAME = "Demo provider (this site)"
COMPLETE = "notifications/elicitation/complete"
ID_RE = re.compile(r"^[A-Za-z0-9_-]+$")


@pytest.fixture(autouse=True)
def _url_elicitation_site(settings):
    """Fresh Fernet key; an https BASE_URL (the live fixture replaces it with its loopback URL)."""
    settings.ELICITATION = {"ENCRYPTION_KEYS": [Fernet.generate_key().decode()]}
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": SITE, "SSE_POLL_INTERVAL_SECONDS": 0.01}


# --- shared helpers -------------------------------------------------------------------------------


@pytest.fixture
def provider(db, _url_elicitation_site):
    return demo_provider()


@pytest.fixture
def session(user, public_app, resource):
    return open_session(user, public_app, resource)


def connect_request(user, session, **extra) -> Elicitation:
    return create_url_elicitation(
        user=user,
        session=session,
        message="Connect your Demo account to continue.",
        kind="connect",
        provider="demo",
        **extra,
    )


def secret_request(user, session, name="demo_api_key") -> Elicitation:
    return create_url_elicitation(
        user=user, session=session, message="Enter your Demo API key.", kind="secret", secret_name=name
    )


def browser(user=None, **kwargs) -> Client:
    client = Client(**kwargs)
    if user is not None:
        client.force_login(user)
    return client


def completion(row: Elicitation) -> dict:
    return {"jsonrpc": "2.0", "method": COMPLETE, "params": {"elicitationId": row.elicitation_id}}


def audit_kinds() -> list[str]:
    return list(AuditEvent.objects.order_by("id").values_list("kind", flat=True))


# Tool contexts for the tool-facing API (the client's answers are scripted).


@dataclass
class ScriptedContext(ToolContext):
    """A ToolContext whose client answers ``send_request`` with ``answer`` (or raises it);
    ``during`` runs while the client "shows" the request (the user acting on the page)."""

    answer: Any = None
    during: Any = None
    sent: list = field(default_factory=list)

    async def send_request(self, method, params=None, *, timeout=None, request_id=None, poll=None, poll_interval=0.25):
        self.sent.append({"method": method, "params": params, "id": request_id})
        if self.during is not None:
            await self.during()
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


async def _no_sink(message):  # pragma: no cover - send_request is scripted
    raise AssertionError("nothing goes through the sink")


def tool_context(session: McpSession, *, streaming=True, **kwargs) -> ScriptedContext:
    principal = SimpleNamespace(
        user=session.user,
        application=session.application,
        client_id=session.application.client_id,
        scopes=frozenset({"mcp"}),
        resource=session.resource,
    )
    return ScriptedContext(
        principal=principal,
        session=session,
        request=None,
        request_id=11,
        protocol_version=session.protocol_version,
        tool_name="demo_profile",
        sink=_no_sink if streaming else None,
        **kwargs,
    )


def unsupported_text(what: str) -> str:
    return (
        f"{what} Your MCP client cannot open a link for that (it did not declare URL-mode elicitation). "
        f"Sign in at {SITE}/elicitation/connections/ to do it there, then try again."
    )


# --- the demo provider command --------------------------------------------------------------------


@pytest.mark.django_db
def test_ensure_demo_provider_registers_this_site_as_the_provider_even_with_a_dash_leading_secret():
    """A client secret beginning with "-" (1 in 64 generated ones) must not break the inner command."""
    from oauth2_provider.models import get_application_model

    secret = "-leading-dash-secret-0123456789"
    call_command("ensure_demo_provider", f"--client-secret={secret}", stdout=io.StringIO())
    provider = ThirdPartyProvider.objects.get(slug="demo")
    assert (provider.client_id, provider.client_secret) == ("demo-provider-client", secret)
    assert (provider.issuer, provider.authorization_endpoint, provider.token_endpoint) == (
        SITE,
        f"{SITE}/oauth/authorize",
        f"{SITE}/oauth/token",
    )
    assert (provider.revocation_endpoint, provider.userinfo_endpoint, provider.resource) == (
        f"{SITE}/oauth/revoke",
        f"{SITE}/api/profile",
        f"{SITE}/api",
    )
    assert provider.redirect_uri == f"{SITE}/elicitation/callback/demo/"
    application = get_application_model().objects.get(client_id="demo-provider-client")
    assert application.redirect_uris == provider.redirect_uri and application.client_type == "confidential"
    from django.contrib.auth.hashers import check_password

    assert check_password(secret, application.client_secret)


# --- create_url_elicitation -----------------------------------------------------------------------


@pytest.mark.django_db
def test_created_connect_elicitation_is_pending_with_an_opaque_expiring_link(
    user, public_app, resource, provider, session, mint_token
):
    token = mint_token(user, public_app, resource=resource.uri)
    before = timezone.now()
    row = connect_request(user, session, scopes=["profile", "extra"])
    assert (row.mode, row.kind, row.status) == ("url", "connect", "pending")
    assert (row.user, row.session_id, row.provider) == (user, session.pk, provider)
    assert row.scopes == "profile extra"
    assert row.message == "Connect your Demo account to continue."
    assert before + timedelta(seconds=599) <= row.expires_at <= timezone.now() + timedelta(seconds=601)
    assert len(row.elicitation_id) >= 32 and ID_RE.match(row.elicitation_id)
    assert row.url == f"{SITE}/elicitation/{row.elicitation_id}/"
    for private in ("alice", "alice@example.com", session.pk, token):
        assert private not in row.url
    assert outbox(session) == []  # send=False: only the row
    assert connect_request(user, session).elicitation_id != row.elicitation_id


@pytest.mark.django_db
def test_ttl_seconds_sets_the_expiry(user, provider, session):
    row = connect_request(user, session, ttl_seconds=30)
    assert timezone.now() + timedelta(seconds=28) <= row.expires_at <= timezone.now() + timedelta(seconds=31)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param({"kind": "connect", "provider": "nope"}, id="unknown-provider"),
        pytest.param({"kind": "connect", "provider": "disabled"}, id="disabled-provider"),
        pytest.param({"kind": "connect", "provider": None}, id="no-provider"),
        pytest.param({"kind": "connect", "provider": "demo", "message": ""}, id="empty-message"),
        pytest.param({"kind": "connect", "provider": "demo", "message": "   "}, id="blank-message"),
        pytest.param({"kind": "connect", "provider": "demo", "message": "a\x00b"}, id="nul-message"),
        pytest.param({"kind": "connect", "provider": "demo", "message": "x" * 2001}, id="long-message"),
        pytest.param({"kind": "secret"}, id="secret-without-name"),
        pytest.param({"kind": "secret", "secret_name": "k" * 101}, id="secret-name-too-long"),
        pytest.param({"kind": "external", "target_url": "http://pay.example/checkout"}, id="external-http"),
        pytest.param({"kind": "external", "target_url": "javascript:alert(1)"}, id="external-javascript"),
        pytest.param({"kind": "external"}, id="external-without-target"),
        pytest.param({"kind": "payment"}, id="unknown-kind"),
        pytest.param({"kind": ""}, id="form-kind"),
        pytest.param({"kind": "connect", "provider": "demo", "ttl_seconds": 0}, id="zero-ttl"),
    ],
)
def test_create_url_elicitation_refuses_bad_arguments(user, session, provider, arguments):
    ThirdPartyProvider.objects.create(
        slug="disabled",
        name="Off",
        client_id="x",
        enabled=False,
        authorization_endpoint="https://off.example/a",
        token_endpoint="https://off.example/t",
    )
    arguments = {"message": "Do it.", **arguments}
    with pytest.raises(ValueError):
        create_url_elicitation(user=user, session=session, **arguments)
    assert not Elicitation.objects.exists()


@pytest.mark.django_db
def test_create_url_elicitation_refuses_a_dead_or_foreign_session(user, other_user, public_app, resource, provider):
    ended = open_session(user, public_app, resource)
    end_session(ended)
    idle = open_session(user, public_app, resource)
    McpSession.objects.filter(pk=idle.pk).update(last_seen_at=timezone.now() - timedelta(days=30))
    bobs = open_session(other_user, public_app, resource)
    for session, pattern in [
        (ended, "ended"),
        (idle, "ended"),
        (ended.pk, "no live MCP session"),
        ("unknown-session-id", "no live MCP session"),
        (bobs, "another user"),
        (bobs.pk, "another user"),
    ]:
        with pytest.raises(ValueError, match=pattern):
            connect_request(user, session)
    assert not Elicitation.objects.exists()


@pytest.mark.django_db
def test_external_elicitation_accepts_https_and_loopback_http_targets(user, session):
    for target in ("https://pay.example/checkout?order=1", "http://127.0.0.1:9000/pay", "http://localhost/pay"):
        row = create_url_elicitation(user=user, session=session, message="Pay.", kind="external", target_url=target)
        assert (row.kind, row.target_url, row.status) == ("external", target, "pending")


@pytest.mark.django_db
def test_url_elicitation_needs_an_https_or_loopback_site(settings, user, session):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": "http://testserver"}
    with pytest.raises(ImproperlyConfigured, match="https"):
        secret_request(user, session)
    assert not Elicitation.objects.exists()


# --- -32042 through the MCP endpoint --------------------------------------------------------------

MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def mcp_post(client: Client, token: str, message: dict, session_id: str | None = None):
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    if session_id:
        headers["Mcp-Session-Id"] = session_id
    return client.post("/mcp", json.dumps(message), content_type="application/json", headers=headers)


def mcp_initialize(client: Client, token: str, capabilities: dict | None) -> str:
    params = {
        "protocolVersion": "2025-11-25",
        "clientInfo": {"name": "url-test", "version": "1"},
        "capabilities": {} if capabilities is None else capabilities,
    }
    response = mcp_post(client, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    assert response.status_code == 200, response.content
    return response["Mcp-Session-Id"]


# --- Celery tasks ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_expire_elicitations_marks_only_past_due_pending_rows(user, provider, session):
    due, fresh, done = connect_request(user, session), connect_request(user, session), connect_request(user, session)
    past = timezone.now() - timedelta(seconds=1)
    Elicitation.objects.filter(pk__in=[due.pk, done.pk]).update(expires_at=past)
    Elicitation.objects.filter(pk=done.pk).update(status="completed")
    assert expire_elicitations() == 1
    assert [refresh(r).status for r in (due, fresh, done)] == ["expired", "pending", "completed"]
    assert due.completed_at is not None
    assert expire_elicitations() == 0


@pytest.mark.django_db
def test_cleanup_deletes_only_old_finished_elicitations(settings, user, provider, session):
    settings.ELICITATION = {**settings.ELICITATION, "RETENTION_DAYS": 30}
    old_done, old_pending, new_done = (connect_request(user, session) for _ in range(3))
    Elicitation.objects.filter(pk__in=[old_done.pk, new_done.pk]).update(status="expired")
    Elicitation.objects.filter(pk__in=[old_done.pk, old_pending.pk]).update(
        created_at=timezone.now() - timedelta(days=31)
    )
    assert cleanup() == 1
    assert set(Elicitation.objects.values_list("pk", flat=True)) == {old_pending.pk, new_done.pk}
    settings.ELICITATION = {**settings.ELICITATION, "RETENTION_DAYS": None}
    Elicitation.objects.update(status="completed", created_at=timezone.now() - timedelta(days=365))
    assert cleanup() == 0 and Elicitation.objects.count() == 2


# --- answers that reach another worker, and the outbox-sent elicitation ---------------------------


def answer(row: Elicitation, action: str) -> dict:
    return {"jsonrpc": "2.0", "id": f"elicitation-{row.elicitation_id}", "result": {"action": action}}


@pytest.mark.django_db
def test_expiry_keeps_an_answer_in_transit_for_the_waiting_tool(user, provider, session):
    row = connect_request(user, session, request_id=5)
    record_client_answer(sender=McpSession, session=session, message=answer(row, "accept"))
    Elicitation.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert expire_elicitations() == 1
    row = refresh(row)
    assert (row.status, row.client_answer) == ("expired", answer(row, "accept"))


@pytest.mark.django_db
def test_the_pages_name_the_token_s_client_without_a_session(user, public_app, provider):
    """2026-07-28 rows have no session: the page names the client the row keeps, as the consent
    page does (invisible format characters dropped); a row of no client says "your MCP client"."""
    public_app.name = "Notes\u202e app"
    public_app.save()
    named = create_url_elicitation(
        user=user, session=None, message="Connect.", kind="connect", provider="demo", application=public_app
    )
    secret = create_url_elicitation(
        user=user, session=None, message="Key?", kind="secret", secret_name="k", application=public_app.pk
    )
    unnamed = create_url_elicitation(user=user, session=None, message="Connect.", kind="connect", provider="demo")
    client = browser(user)
    shown = [client.get(path_of(row)).content.decode() for row in (named, secret, unnamed)]
    assert '<strong id="client-name">Notes app</strong> asked for this' in shown[0]
    assert '<strong id="client-name">Notes app</strong> asked for this' in shown[1]
    assert '<strong id="client-name">your MCP client</strong> asked for this' in shown[2]
    assert (named.application_id, secret.application_id, unnamed.application_id) == (public_app.pk, public_app.pk, None)


@pytest.mark.django_db(transaction=True)
def test_a_finished_page_wakes_whoever_waits_for_the_row(settings, user, provider):
    """finish_elicitation publishes the row's wake-up topic on commit (wait_for_outcome sleeps on
    it, on every worker); a wake-up that arrives before anyone waits is kept for the next wait."""
    import asyncio

    from asgiref.sync import sync_to_async

    from elicitation.service import finish_elicitation, outcome_topic
    from mcp_oauth.mcp_server.transport import wakeup

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "WAKEUP_URL": None}
    row = create_url_elicitation(user=user, session=None, message="Key?", kind="secret", secret_name="k")
    other = create_url_elicitation(user=user, session=None, message="Key?", kind="secret", secret_name="j")

    async def scenario():
        with (
            wakeup.hub.subscribe(outcome_topic(row.pk)) as woken,
            wakeup.hub.subscribe(outcome_topic(other.pk)) as idle,
        ):
            assert await sync_to_async(finish_elicitation)(row.elicitation_id) is True
            await asyncio.sleep(0)
            return await woken.wait(0), await idle.wait(0)

    assert async_to_sync(scenario)() == (True, False)


@pytest.mark.django_db
def test_a_session_s_row_keeps_the_session_s_client(user, public_app, provider, session):
    assert connect_request(user, session).application_id == session.application_id == public_app.pk


@pytest.mark.django_db
def test_a_response_posted_to_the_endpoint_without_a_waiter_is_stored_on_the_row(
    user, public_app, resource, provider, mint_token
):
    client, token = Client(), mint_token(user, public_app, resource=resource.uri)
    session_id = mcp_initialize(client, token, URL_CAPS)
    row = connect_request(user, McpSession.objects.get(pk=session_id), request_id=9)
    response = mcp_post(client, token, answer(row, "decline"), session_id)
    assert response.status_code == 202 and response.content == b""
    row = refresh(row)
    # a tool (in another worker) waits for this one: it reads the answer and finishes the row itself
    assert (row.client_answer, row.status) == (answer(row, "decline"), "pending")


@pytest.mark.django_db
def test_outbox_sent_elicitation_is_an_elicitation_create_request_and_a_decline_finishes_it(
    user, public_app, resource, provider, mint_token
):
    client, token = Client(), mint_token(user, public_app, resource=resource.uri)
    session_id = mcp_initialize(client, token, URL_CAPS)
    session = McpSession.objects.get(pk=session_id)
    row = connect_request(user, session, send=True)
    assert outbox(session) == [
        {
            "jsonrpc": "2.0",
            "id": f"elicitation-{row.elicitation_id}",
            "method": "elicitation/create",
            "params": {
                "mode": "url",
                "elicitationId": row.elicitation_id,
                "url": row.url,
                "message": "Connect your Demo account to continue.",
            },
        }
    ]
    assert mcp_post(client, token, answer(row, "decline"), session_id).status_code == 202
    row = refresh(row)
    assert row.status == "declined" and row.completed_at is not None
    assert browser(user).get(path_of(row)).status_code == 404


@pytest.mark.django_db
def test_outbox_sent_elicitation_cancel_answer_cancels_and_accept_keeps_it_pending(user, provider, session):
    cancelled, accepted = connect_request(user, session, send=True), connect_request(user, session, send=True)
    record_client_answer(sender=McpSession, session=session, message=answer(cancelled, "cancel"))
    record_client_answer(sender=McpSession, session=session, message=answer(accepted, "accept"))
    assert (refresh(cancelled).status, refresh(accepted).status) == ("cancelled", "pending")


@pytest.mark.django_db
def test_outbox_sending_needs_a_session_that_declared_url_mode(user, public_app, resource, provider):
    form_only = open_session(user, public_app, resource, FORM_CAPS)
    with pytest.raises(ValueError, match="URL-mode"):
        connect_request(user, form_only, send=True)
    assert not Elicitation.objects.exists() and outbox(form_only) == []


# --- live set-up: the provider is this project's own authorization server on loopback -------------


@dataclass
class LiveSite:
    base: str
    provider: ThirdPartyProvider
    resource: Any

    def browser(self, username: str, password: str = PASSWORD) -> httpx2.Client:
        """A logged-in user agent (the site's own login form)."""
        http = httpx2.Client(base_url=self.base, follow_redirects=False, timeout=30)
        page = http.get("/accounts/login/")
        form = next(f for f in forms_of(page.text) if "password" in f["fields"])
        response = http.post("/accounts/login/", data={**form["fields"], "username": username, "password": password})
        assert response.status_code == 302, response.text[:500]
        return http


@pytest.fixture
def live_site(settings, transactional_db):
    port = free_port()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": f"http://127.0.0.1:{port}"}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    resource = ensure_default_resource()
    provider = demo_provider()
    from project.asgi import application

    with run_asgi_server(application, port) as base:
        yield LiveSite(base=base, provider=provider, resource=resource)


@pytest.fixture
def http(live_site, user):
    """alice's browser, logged in at the live site."""
    agent = live_site.browser("alice")
    yield agent
    agent.close()


def authorize_at_provider(http: httpx2.Client, authorize_url: str, *, approve: bool = True) -> str:
    """Consent at the provider (this site's consent page); the redirect back to the callback."""
    page = http.get(authorize_url)
    assert page.status_code == 200, page.text[:500]
    (form,) = [f for f in forms_of(page.text) if "client_id" in f["fields"]]
    data = {**form["fields"], **({"allow": "Authorize"} if approve else {})}
    response = http.post(urljoin(authorize_url, form["action"] or authorize_url), data=data)
    assert response.status_code == 303, response.text[:500]  # consent POST: 303 See Other (RFC 9700 §4.12)
    return response.headers["location"]


def continue_on_start_page(http: httpx2.Client, url: str) -> str:
    page = http.get(url)
    assert page.status_code == 200, page.text[:500]
    (form,) = forms_of(page.text)
    response = http.post(url, data={**form["fields"], "action": "continue"})
    assert response.status_code == 303, response.text[:500]
    return response.headers["location"]


def connect_through(http: httpx2.Client, url: str) -> httpx2.Response:
    """Start page → provider consent → callback; the callback's answer."""
    callback = authorize_at_provider(http, continue_on_start_page(http, url))
    return http.get(callback)


def profile_status(live: LiveSite, access_token: str) -> int:
    return requests.get(
        f"{live.base}/api/profile", headers={"Authorization": f"Bearer {access_token}"}, timeout=10
    ).status_code


# --- live: connecting through the start page (code exchange at the real provider) -----------------


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_live_connect_through_the_start_page_stores_the_connection_and_notifies_the_asking_session(
    live_site, user, public_app, http
):
    from elicitation.signals import connection_created, elicitation_finished

    asking = open_session(user, public_app, live_site.resource)
    bystander = open_session(user, public_app, live_site.resource)
    row = connect_request(user, asking)
    assert row.url == f"{live_site.base}/elicitation/{row.elicitation_id}/"
    signalled = []

    def on_finished(sender, elicitation, **kwargs):
        signalled.append(("finished", elicitation.elicitation_id, elicitation.status))

    def on_connected(sender, connection, user, **kwargs):
        signalled.append(("connected", connection.provider.slug, user.get_username()))

    elicitation_finished.connect(on_finished, dispatch_uid="test-finished")
    connection_created.connect(on_connected, dispatch_uid="test-connected")
    authorize_url = continue_on_start_page(http, row.url)
    assert authorize_url.startswith(f"{live_site.base}/oauth/authorize?")
    callback = authorize_at_provider(http, authorize_url)
    assert callback.startswith(f"{live_site.base}/elicitation/callback/demo/?")
    assert set(query_of(callback)) == {"code", "state", "iss"} and query_of(callback)["iss"] == live_site.base
    try:
        response = http.get(callback)
    finally:
        elicitation_finished.disconnect(dispatch_uid="test-finished")
        connection_created.disconnect(dispatch_uid="test-connected")
    assert response.status_code == 200, response.text[:500]
    assert "Your Demo provider (this site) account alice@example.com is connected." in response.text
    assert signalled == [("finished", row.elicitation_id, "completed"), ("connected", "demo", "alice")]
    assert response.headers["x-frame-options"] == "DENY" and response.headers["cache-control"] == "no-store"

    connection = ThirdPartyConnection.objects.get()
    assert (connection.user, connection.provider.slug, connection.account_label) == (user, "demo", "alice@example.com")
    assert "profile" in connection.scope_list and connection.token_type == "Bearer"
    assert connection.access_token and connection.access_token not in connection.access_token_encrypted
    assert connection.refresh_token and connection.refresh_token not in connection.refresh_token_encrypted
    assert connection.expires_at is not None and connection.expires_at > timezone.now() + timedelta(seconds=3500)
    assert profile_status(live_site, connection.access_token) == 200

    row = refresh(row)
    assert row.status == "completed" and row.notified_at is not None
    assert outbox(asking) == [completion(row)]
    assert outbox(bystander) == []
    kinds = audit_kinds()
    assert "connection.created" in kinds and "elicitation.finished" in kinds
    created = AuditEvent.objects.get(kind="connection.created")
    assert created.user == user and created.detail == {
        "provider": "demo",
        "scopes": ["profile"],
        "elicitation": row.elicitation_id[:8],
    }
    # the callback cannot be replayed, and the finished link is dead
    assert http.get(callback).status_code == 400
    assert http.get(row.url).status_code == 404
    assert ThirdPartyConnection.objects.count() == 1


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_live_callback_with_a_code_the_provider_refuses_fails_the_elicitation_and_tells_the_session(
    live_site, user, public_app, http
):
    """Issue #28: the failed exchange used to leave the elicitation pending (no completion ever
    reached the client). It is terminal now, with the provider's code, and notified at once."""
    session = open_session(user, public_app, live_site.resource)
    row = connect_request(user, session)
    callback = authorize_at_provider(http, continue_on_start_page(http, row.url))
    tampered = callback.replace("code=", "code=x", 1)
    response = http.get(tampered)
    assert response.status_code == 502
    assert (
        "did not complete the sign-in: Demo provider (this site) refused the sign-in code when this site "
        "exchanged it (invalid_grant)." in response.text
    )
    assert 'data-ok="false"' in response.text and "Your MCP client has been told" in response.text
    row = refresh(row)
    assert (row.status, row.error) == ("failed", "provider: invalid_grant")
    assert not ThirdPartyConnection.objects.exists()
    assert outbox(session) == [completion(row)]
    # the finished link is dead: the next tool call asks again with a new one
    assert http.get(row.url).status_code == 404


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_live_denying_consent_at_the_provider_declines_the_elicitation(live_site, user, public_app, http):
    session = open_session(user, public_app, live_site.resource)
    row = connect_request(user, session)
    callback = authorize_at_provider(http, continue_on_start_page(http, row.url), approve=False)
    assert query_of(callback)["error"] == "access_denied"
    assert http.get(callback).status_code == 200
    row = refresh(row)
    assert row.status == "declined" and outbox(session) == [completion(row)]
    assert not ThirdPartyConnection.objects.exists()


# --- live: connect and disconnect on the connections page -----------------------------------------


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_live_connections_page_connects_without_an_elicitation_and_disconnect_revokes_at_the_provider(
    live_site, user, http
):
    page = http.get("/elicitation/connections/")
    (form,) = forms_of(page.text)
    response = http.post("/elicitation/connections/", data={**form["fields"], "action": "connect"})
    assert response.status_code == 303
    done = http.get(authorize_at_provider(http, response.headers["location"]))
    assert done.status_code == 303 and done.headers["location"] == "/elicitation/connections/"  # back to the list
    connection = ThirdPartyConnection.objects.get()
    assert (connection.user, connection.account_label) == (user, "alice@example.com")
    assert not Elicitation.objects.exists()
    assert AuditEvent.objects.get(kind="connection.created").detail["elicitation"] is None
    access_token = connection.access_token
    assert profile_status(live_site, access_token) == 200

    page = http.get("/elicitation/connections/")
    assert "Connected as <strong>alice@example.com</strong>" in page.text and "<code>profile</code>" in page.text
    assert access_token not in page.text
    (form,) = forms_of(page.text)
    response = http.post("/elicitation/connections/", data={**form["fields"], "action": "disconnect"})
    assert (response.status_code, response.headers["location"]) == (303, "/elicitation/connections/")
    assert not ThirdPartyConnection.objects.exists()
    revoked = AuditEvent.objects.get(kind="connection.revoked")
    assert revoked.user == user
    assert revoked.detail == {"provider": "demo", "reason": "disconnected by the user", "by": user.pk}
    assert profile_status(live_site, access_token) == 401
    assert "Not connected." in http.get("/elicitation/connections/").text


# --- live: refresh on use -------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_live_require_connection_refreshes_an_expired_token_at_the_provider(live_site, user, public_app, http):
    session = open_session(user, public_app, live_site.resource)
    assert connect_through(http, connect_request(user, session).url).status_code == 200
    connection = ThirdPartyConnection.objects.get()
    old_access, old_refresh = connection.access_token, connection.refresh_token
    ThirdPartyConnection.objects.filter(pk=connection.pk).update(expires_at=timezone.now() - timedelta(minutes=5))

    account = async_to_sync(require_connection)(tool_context(session), "demo", ["profile"])
    assert isinstance(account, ConnectedAccount)
    assert account.access_token != old_access and account.account_label == "alice@example.com"
    assert account.authorization_header == f"Bearer {account.access_token}"
    assert old_access not in repr(account) and account.access_token not in repr(account)
    connection = ThirdPartyConnection.objects.get()
    assert connection.access_token == account.access_token and connection.refresh_token != old_refresh
    assert connection.expires_at > timezone.now() + timedelta(seconds=3500) and connection.last_used_at is not None
    assert profile_status(live_site, account.access_token) == 200
    # a fresh token is used as is
    assert fresh_access_token(connection) == account.access_token
    assert Elicitation.objects.filter(status="pending").count() == 0


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_live_refused_refresh_deletes_the_connection_and_asks_again(live_site, user, public_app, http):
    session = open_session(user, public_app, live_site.resource)
    assert connect_through(http, connect_request(user, session).url).status_code == 200
    connection = ThirdPartyConnection.objects.get()
    provider = live_site.provider
    revoked = requests.post(
        provider.revocation_endpoint,
        data={"token": connection.refresh_token, "token_type_hint": "refresh_token"},
        auth=(provider.client_id, provider.client_secret),
        timeout=10,
    )
    assert revoked.status_code == 200
    ThirdPartyConnection.objects.filter(pk=connection.pk).update(expires_at=timezone.now() - timedelta(minutes=5))

    with pytest.raises(UrlElicitationRequired) as caught:
        async_to_sync(require_connection)(tool_context(session), "demo", ["profile"])
    assert caught.value.code == -32042
    assert not ThirdPartyConnection.objects.exists()
    event = AuditEvent.objects.get(kind="connection.revoked")
    assert (event.user, event.detail) == (
        user,
        {"provider": "demo", "reason": "refresh refused: invalid_grant", "by": None},
    )
    pending = Elicitation.objects.get(status="pending")
    assert caught.value.data["elicitations"][0]["elicitationId"] == pending.elicitation_id


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_live_access_token_revoked_at_the_provider_asks_to_connect_again(live_site, user, public_app, http):
    """The user revoked the connection at the provider (its connected-apps page): the stored,
    unexpired access token now gets 401 from the provider's API. The demo tool then forgets the
    connection and asks again (``-32042`` with a new link), instead of failing on every call."""
    from project.mcp_tools import demo_profile

    session = open_session(user, public_app, live_site.resource)
    assert connect_through(http, connect_request(user, session).url).status_code == 200
    connection = ThirdPartyConnection.objects.get()
    provider = live_site.provider
    revoked = requests.post(
        provider.revocation_endpoint,
        data={"token": connection.access_token, "token_type_hint": "access_token"},
        auth=(provider.client_id, provider.client_secret),
        timeout=10,
    )
    assert revoked.status_code == 200
    assert profile_status(live_site, connection.access_token) == 401

    with pytest.raises(UrlElicitationRequired) as caught:
        async_to_sync(demo_profile)(tool_context(session))
    assert caught.value.code == -32042
    assert not ThirdPartyConnection.objects.exists()
    event = AuditEvent.objects.get(kind="connection.revoked")
    assert (event.user, event.detail) == (user, {"provider": "demo", "reason": "rejected", "by": None})
    pending = Elicitation.objects.get(status="pending")
    assert caught.value.data["elicitations"][0]["elicitationId"] == pending.elicitation_id


@pytest.mark.django_db
def test_a_retry_before_the_user_finished_gets_the_same_link(user, provider, session):
    """A client that retries (or loops) before the user connected gets the pending link again,
    not one more row; another session gets its own."""
    ctx = tool_context(session)
    ids = set()
    for _ in range(3):
        with pytest.raises(UrlElicitationRequired) as caught:
            async_to_sync(require_connection)(ctx, "demo")
        ids.add(caught.value.data["elicitations"][0]["elicitationId"])
    assert len(ids) == 1 and Elicitation.objects.count() == 1
    other = tool_context(open_session(user, session.application, session.resource, URL_CAPS))
    with pytest.raises(UrlElicitationRequired) as caught:
        async_to_sync(require_connection)(other, "demo")
    assert caught.value.data["elicitations"][0]["elicitationId"] not in ids
    assert Elicitation.objects.count() == 2


@pytest.mark.django_db
def test_an_unstorable_answer_reaching_another_worker_becomes_an_error_for_the_asker(session):
    from elicitation.signals import record_client_answer

    row = Elicitation.objects.create(
        mode="form",
        message="Name?",
        user=session.user,
        session=session,
        expires_at=timezone.now() + timedelta(minutes=5),
    )
    record_client_answer(
        sender=None,
        session=session,
        message={
            "jsonrpc": "2.0",
            "id": f"elicitation-{row.elicitation_id}",
            "result": {"action": "accept", "content": {"name": "A\x00da"}},
        },
    )
    row.refresh_from_db()
    assert row.client_answer == {
        "jsonrpc": "2.0",
        "id": f"elicitation-{row.elicitation_id}",
        "error": {"code": -32602, "message": "the answer holds text that cannot be stored"},
    }
