"""The URL-mode pages (elicitation.views) at the Django level: the start page (login, identity, interstitial, cancel, continue with state and PKCE), the provider's callback (state single-use and bounded, errors, another browser or user), the secure input page and the connections page."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from urllib.parse import urlencode, urlsplit

import pytest
from django.test import Client
from django.utils import timezone

from elicitation.models import Elicitation, StoredSecret, ThirdPartyConnection, ThirdPartyProvider
from elicitation.url_mode import (
    complete_elicitation,
    create_url_elicitation,
    get_secret,
)
from elicitation.views import SESSION_KEY
from mcp_oauth.models import AuditEvent
from tests.elicitation.test_service import (  # noqa: F401 - fixtures
    COMPLETE,
    PROVIDER_NAME,
    ScriptedContext,
    _no_sink,
    _url_elicitation_site,
    answer,
    audit_kinds,
    browser,
    completion,
    connect_request,
    provider,
    secret_request,
    session,
    tool_context,
    unsupported_text,
)
from tests.support.elicitation_helpers import (
    SITE,
    outbox,
    path_of,
    query_of,
    refresh,
    s256,
    start_authorization,
)
from tests.support.live import forms_of


def callback_path(**params) -> str:
    return "/elicitation/callback/demo/?" + urlencode(params)


def _plant_state(client: Client, state: str, *, user_pk: int, elicitation_id: str, age: float = 0) -> None:
    """Write a pending authorization into ``client``'s server-side session (what ``continue`` stores)."""
    store = client.session
    store[SESSION_KEY] = {
        state: {
            "provider": "demo",
            "elicitation": elicitation_id,
            "verifier": "v" * 43,
            "user": user_pk,
            "scopes": ["profile"],
            "at": time.time() - age,
        }
    }
    store.save()


@pytest.mark.django_db
def test_start_page_of_an_unknown_id_is_404(user):
    client = browser(user)
    for path in ("/elicitation/unknown-id/", "/elicitation/" + "a" * 65 + "/"):
        response = client.get(path)
        assert response.status_code == 404
        assert response["Cache-Control"] == "no-store"
        assert b"Link not valid" in response.content


@pytest.mark.django_db
def test_start_page_of_an_expired_id_is_404_and_marks_it_expired(user, provider, session):
    row = connect_request(user, session)
    Elicitation.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert browser(user).get(path_of(row)).status_code == 404
    assert refresh(row).status == "expired"


@pytest.mark.django_db
@pytest.mark.parametrize("status", ["completed", "cancelled", "declined", "expired"])
def test_start_page_of_a_finished_id_is_404(user, provider, session, status):
    row = connect_request(user, session)
    Elicitation.objects.filter(pk=row.pk).update(status=status)
    client = browser(user)
    assert client.get(path_of(row)).status_code == 404
    assert client.post(path_of(row), {"action": "continue"}).status_code == 404
    assert refresh(row).status == status


@pytest.mark.django_db
def test_start_page_of_a_form_elicitation_is_404(user, session):
    row = Elicitation.objects.create(
        message="Name?", user=user, session=session, expires_at=timezone.now() + timedelta(minutes=5)
    )
    assert browser(user).get(f"/elicitation/{row.elicitation_id}/").status_code == 404


@pytest.mark.django_db
def test_start_page_sends_an_anonymous_visitor_to_login(user, provider, session):
    row = connect_request(user, session)
    response = Client().get(path_of(row))
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next=/elicitation/{row.elicitation_id}/"
    assert response["Cache-Control"] == "no-store"
    assert refresh(row).status == "pending"


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["get", "post"])
def test_start_page_refuses_another_user_and_audits_it(user, other_user, provider, session, method):
    row = connect_request(user, session)
    client = browser(other_user)
    response = getattr(client, method)(path_of(row), {"action": "continue"} if method == "post" else {})
    assert response.status_code == 403
    assert b"Wrong account" in response.content
    event = AuditEvent.objects.get()
    assert (event.kind, event.user) == ("identity.mismatch", other_user)
    assert event.detail == {"where": "start", "elicitation": row.elicitation_id[:8], "expected_user": user.pk}
    row = refresh(row)
    assert (row.status, row.completed_at, row.notified_at, row.user) == ("pending", None, None, user)
    assert SESSION_KEY not in client.session


@pytest.mark.django_db
def test_start_page_shows_the_interstitial_to_the_right_user(user, provider, session):
    row = connect_request(user, session)
    response = browser(user).get(path_of(row))
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<h1 id="interstitial-title">Connect {PROVIDER_NAME}?</h1>' in html
    assert '<strong id="provider-host">site.example</strong>' in html
    assert '<dd id="account">alice</dd>' in html
    assert '<strong id="client-name">Test client</strong> asked for this' in html
    assert '<q id="elicitation-message">Connect your Demo account to continue.</q>' in html
    assert '<dd id="scopes"><code>profile</code> </dd>' in html
    assert response["X-Frame-Options"] == "DENY"
    assert response["Cache-Control"] == "no-store"
    assert response["Referrer-Policy"] == "same-origin"
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]
    (form,) = forms_of(html)
    assert form["method"] == "post" and set(form["fields"]) == {"csrfmiddlewaretoken"}


@pytest.mark.django_db
def test_start_page_post_needs_the_csrf_token(user, provider, session):
    row = connect_request(user, session)
    client = browser(user, enforce_csrf_checks=True)
    assert client.post(path_of(row), {"action": "continue"}).status_code == 403
    assert client.post(path_of(row), {"action": "cancel"}).status_code == 403
    assert refresh(row).status == "pending" and SESSION_KEY not in client.session
    # with the page's token the same POST goes through
    token = forms_of(client.get(path_of(row)).content.decode())[0]["fields"]["csrfmiddlewaretoken"]
    assert client.post(path_of(row), {"action": "continue", "csrfmiddlewaretoken": token}).status_code == 303


@pytest.mark.django_db
def test_start_page_cancel_finishes_and_notifies_the_asking_session(
    user, provider, session, django_capture_on_commit_callbacks
):
    row = connect_request(user, session)
    with django_capture_on_commit_callbacks(execute=True):
        response = browser(user).post(path_of(row), {"action": "cancel"})
    assert response.status_code == 200 and b'data-ok="false"' in response.content
    row = refresh(row)
    assert row.status == "cancelled" and row.completed_at is not None and row.notified_at is not None
    assert outbox(session) == [completion(row)]
    event = AuditEvent.objects.get()
    assert (event.kind, event.user, event.client_id) == ("elicitation.finished", user, session.application.client_id)
    assert event.detail == {"elicitation": row.elicitation_id[:8], "kind": "connect", "status": "cancelled"}
    assert browser(user).get(path_of(row)).status_code == 404


@pytest.mark.django_db
def test_start_page_continue_redirects_to_the_provider_with_state_and_pkce(user, provider, session):
    row = connect_request(user, session)
    client = browser(user)
    response = client.post(path_of(row), {"action": "continue"})
    assert response.status_code == 303
    assert response["Cache-Control"] == "no-store"
    location = response["Location"]
    parts = urlsplit(location)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "site.example", "/oauth/authorize")
    query = query_of(location)
    assert set(query) == {
        "response_type",
        "client_id",
        "redirect_uri",
        "state",
        "scope",
        "code_challenge",
        "code_challenge_method",
        "resource",
    }
    assert query["response_type"] == "code"
    assert query["client_id"] == "demo-provider-client"
    assert query["redirect_uri"] == f"{SITE}/elicitation/callback/demo/"
    assert query["code_challenge_method"] == "S256"
    assert "profile" in query["scope"].split()
    assert query["resource"] == f"{SITE}/api"
    assert len(query["state"]) >= 43
    entry = client.session[SESSION_KEY][query["state"]]
    assert {k: v for k, v in entry.items() if k not in ("verifier", "at")} == {
        "provider": "demo",
        "elicitation": row.elicitation_id,
        "user": user.pk,
        "scopes": ["profile"],
    }
    assert len(entry["verifier"]) >= 43 and query["code_challenge"] == s256(entry["verifier"])
    assert refresh(row).status == "pending"
    # a second visit makes a new state and verifier
    again = query_of(client.post(path_of(row), {"action": "continue"})["Location"])
    assert again["state"] != query["state"] and again["code_challenge"] != query["code_challenge"]
    assert set(client.session[SESSION_KEY]) == {query["state"], again["state"]}


@pytest.mark.django_db
def test_start_page_unknown_action_is_400(user, provider, session):
    row = connect_request(user, session)
    client = browser(user)
    response = client.post(path_of(row), {"action": "delete"})
    assert response.status_code == 400 and b"Nothing was done: choose Continue or Cancel." in response.content
    assert refresh(row).status == "pending" and SESSION_KEY not in client.session


@pytest.mark.django_db
def test_start_page_of_a_provider_disabled_since_is_410(user, provider, session):
    row = connect_request(user, session)
    ThirdPartyProvider.objects.filter(pk=provider.pk).update(enabled=False)
    assert browser(user).post(path_of(row), {"action": "continue"}).status_code == 410
    assert refresh(row).status == "pending"


@pytest.mark.django_db
def test_external_elicitation_continues_to_the_target_and_completes_by_the_hook(
    user, other_user, session, django_capture_on_commit_callbacks
):
    target = "https://pay.example/checkout?order=42"
    row = create_url_elicitation(
        user=user, session=session, message="Pay the invoice.", kind="external", target_url=target
    )
    client = browser(user)
    page = client.get(path_of(row))
    assert page.status_code == 200 and b'<h1 id="interstitial-title">Continue?</h1>' in page.content
    response = client.post(path_of(row), {"action": "continue"})
    assert (response.status_code, response["Location"]) == (303, target)
    assert refresh(row).status == "pending" and outbox(session) == []
    # the site's webhook reports completion; another user's id does not complete
    assert complete_elicitation(row.elicitation_id, user=other_user) is False
    with django_capture_on_commit_callbacks(execute=True):
        assert complete_elicitation(row.elicitation_id) is True
    assert complete_elicitation(row.elicitation_id) is False
    assert complete_elicitation("x" * 65) is False
    assert refresh(row).status == "completed" and outbox(session) == [completion(row)]


@pytest.mark.django_db
def test_callback_with_an_unknown_or_missing_state_is_400(user, provider):
    client = browser(user)
    for params in ({"code": "abc", "state": "never-issued", "iss": SITE}, {"code": "abc", "iss": SITE}):
        response = client.get(callback_path(**params))
        assert response.status_code == 400 and b"Sign-in not recognised" in response.content
    assert not ThirdPartyConnection.objects.exists()


@pytest.mark.django_db
def test_callback_state_is_single_use(user, provider, session, django_capture_on_commit_callbacks):
    row = connect_request(user, session)
    client = browser(user)
    state = start_authorization(client, row)
    with django_capture_on_commit_callbacks(execute=True):
        first = client.get(callback_path(error="access_denied", state=state, iss=SITE))
    assert first.status_code == 200
    replay = client.get(callback_path(error="access_denied", state=state, iss=SITE))
    assert replay.status_code == 400
    assert client.session[SESSION_KEY] == {}


@pytest.mark.django_db
def test_callback_state_expires_after_state_ttl(user, provider, session):
    row = connect_request(user, session)
    client = browser(user)
    _plant_state(client, "old-state", user_pk=user.pk, elicitation_id=row.elicitation_id, age=601)
    assert client.get(callback_path(error="access_denied", state="old-state", iss=SITE)).status_code == 400
    assert refresh(row).status == "pending"


@pytest.mark.django_db
def test_a_browser_session_keeps_at_most_five_pending_authorizations(user, provider, session):
    row = connect_request(user, session)
    client = browser(user)
    states = [start_authorization(client, row) for _ in range(6)]
    assert set(client.session[SESSION_KEY]) == set(states[1:])
    assert client.get(callback_path(error="access_denied", state=states[0], iss=SITE)).status_code == 400
    assert client.get(callback_path(error="access_denied", state=states[5], iss=SITE)).status_code == 200


@pytest.mark.django_db
def test_callback_access_denied_declines_and_notifies(user, provider, session, django_capture_on_commit_callbacks):
    row = connect_request(user, session)
    client = browser(user)
    state = start_authorization(client, row)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.get(callback_path(error="access_denied", state=state, iss=SITE))
    assert response.status_code == 200
    assert b"did not connect your account" in response.content and b'data-ok="false"' in response.content
    row = refresh(row)
    assert (row.status, row.error) == ("declined", "provider: access_denied")
    assert outbox(session) == [completion(row)]
    assert not ThirdPartyConnection.objects.exists()


@pytest.mark.django_db
def test_callback_other_provider_error_fails_the_elicitation_and_notifies(
    user, provider, session, django_capture_on_commit_callbacks
):
    """Issue #28: a provider error is a failure (terminal, with its code), not a user's cancel."""
    row = connect_request(user, session)
    client = browser(user)
    state = start_authorization(client, row)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.get(callback_path(error="server_error", state=state, iss=SITE))
    assert response.status_code == 200
    assert (
        "did not connect your account: Demo provider (this site) had an internal error (server_error)."
        " Your MCP client has been told." in response.text
    )
    row = refresh(row)
    assert (row.status, row.error) == ("failed", "provider: server_error")
    assert outbox(session) == [completion(row)]


@pytest.mark.django_db
def test_callback_in_another_browser_session_is_400(user, provider, session):
    row = connect_request(user, session)
    first, second = browser(user), browser(user)
    state = start_authorization(first, row)
    response = second.get(callback_path(error="access_denied", state=state, iss=SITE))
    assert response.status_code == 400
    assert refresh(row).status == "pending"
    # the browser that started it still can finish it
    assert first.get(callback_path(error="access_denied", state=state, iss=SITE)).status_code == 200
    assert refresh(row).status == "declined"


@pytest.mark.django_db
def test_callback_for_another_provider_slug_is_400(user, provider, session):
    ThirdPartyProvider.objects.create(
        slug="other",
        name="Other",
        client_id="o",
        issuer="https://other.example",
        authorization_endpoint="https://other.example/a",
        token_endpoint="https://other.example/t",
    )
    row = connect_request(user, session)
    client = browser(user)
    state = start_authorization(client, row)
    response = client.get(f"/elicitation/callback/other/?error=access_denied&state={state}&iss=https://other.example")
    assert response.status_code == 400 and refresh(row).status == "pending"


@pytest.mark.django_db
@pytest.mark.parametrize("state_of", ["first-user", "second-user"])
def test_callback_as_another_user_is_403_audited_and_stores_nothing(user, other_user, provider, session, state_of):
    """A session never changes user without being flushed, so the state is planted: a state made
    for alice in bob's session (start check), or bob's state naming alice's elicitation (row check)."""
    row = connect_request(user, session)
    client = browser(other_user)
    owner = user if state_of == "first-user" else other_user
    _plant_state(client, "planted-state", user_pk=owner.pk, elicitation_id=row.elicitation_id)
    response = client.get(callback_path(code="stolen-code", state="planted-state", iss=SITE))
    assert response.status_code == 403 and b"Wrong account" in response.content
    event = AuditEvent.objects.get()
    assert (event.kind, event.user) == ("identity.mismatch", other_user)
    assert event.detail["where"] == "callback"
    if state_of == "second-user":
        assert event.detail == {"where": "callback", "elicitation": row.elicitation_id[:8], "expected_user": user.pk}
    assert not ThirdPartyConnection.objects.exists()
    assert refresh(row).status == "pending"


@pytest.mark.django_db
def test_callback_anonymous_is_403(user, provider, session):
    row = connect_request(user, session)
    client = Client()
    _plant_state(client, "anon-state", user_pk=user.pk, elicitation_id=row.elicitation_id)
    assert client.get(callback_path(code="c", state="anon-state", iss=SITE)).status_code == 403
    assert AuditEvent.objects.get().kind == "identity.mismatch"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "iss",
    [
        pytest.param("https://evil.example", id="foreign-issuer"),
        pytest.param(None, id="missing"),
        pytest.param(f"{SITE}/other", id="other-path"),
    ],
)
def test_callback_with_a_wrong_or_missing_iss_is_400(user, provider, session, iss):
    assert provider.iss_parameter_supported is True and provider.issuer == SITE
    row = connect_request(user, session)
    client = browser(user)
    state = start_authorization(client, row)
    params = {"code": "some-code", "state": state}
    if iss is not None:
        params["iss"] = iss
    response = client.get(callback_path(**params))
    assert response.status_code == 400
    assert b"did not come from the expected service" in response.content
    assert refresh(row).status == "pending" and not ThirdPartyConnection.objects.exists()


@pytest.mark.django_db
def test_callback_without_a_code_is_400(user, provider, session):
    row = connect_request(user, session)
    client = browser(user)
    state = start_authorization(client, row)
    response = client.get(callback_path(state=state, iss=SITE))
    assert response.status_code == 400 and b"no authorization code" in response.content
    assert refresh(row).status == "pending"


@pytest.mark.django_db
def test_secret_page_shows_a_password_form(user, session):
    row = secret_request(user, session)
    response = browser(user).get(path_of(row))
    assert response.status_code == 200
    html = response.content.decode()
    assert '<input type="password" id="value" name="value" maxlength="4096"' in html
    assert '<q id="elicitation-message">Enter your Demo API key.</q>' in html
    (form,) = forms_of(html)
    assert set(form["fields"]) == {"csrfmiddlewaretoken", "value"} and form["fields"]["value"] == ""
    assert response["X-Frame-Options"] == "DENY" and response["Cache-Control"] == "no-store"


@pytest.mark.django_db
def test_secret_page_stores_the_value_encrypted_and_completes(user, session, django_capture_on_commit_callbacks):
    row = secret_request(user, session)
    with django_capture_on_commit_callbacks(execute=True):
        response = browser(user).post(path_of(row), {"action": "save", "value": "sk-live-0123456789"})
    assert response.status_code == 200 and b"<h1>Saved</h1>" in response.content
    stored = StoredSecret.objects.get()
    assert (stored.user, stored.name) == (user, "demo_api_key")
    assert "sk-live-0123456789" not in stored.value_encrypted and stored.value_encrypted.startswith("gAAAAA")
    assert get_secret(user, "demo_api_key") == "sk-live-0123456789"
    assert get_secret(user, "other") is None
    row = refresh(row)
    assert row.status == "completed" and outbox(session) == [completion(row)]
    event = AuditEvent.objects.get(kind="secret.stored")
    assert (event.user, event.detail) == (user, {"name": "demo_api_key"})
    assert all("sk-live" not in json.dumps(e.detail) for e in AuditEvent.objects.all())
    assert audit_kinds() == ["elicitation.finished", "secret.stored"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty"),
        pytest.param("   ", id="blank"),
        pytest.param("x" * 4097, id="too-long"),
        pytest.param("line1\nline2", id="newline"),
        pytest.param("a\rb", id="carriage-return"),
        pytest.param("a\x00b", id="nul"),
    ],
)
def test_secret_page_refuses_bad_values_and_stores_nothing(user, session, value):
    row = secret_request(user, session)
    response = browser(user).post(path_of(row), {"action": "save", "value": value})
    assert response.status_code == 400
    assert (
        '<p class="error" id="form-error">Enter a value of 1 to 4096 characters on one line.</p>'
        in response.content.decode()
    )
    assert not StoredSecret.objects.exists()
    assert refresh(row).status == "pending" and not AuditEvent.objects.exists()


@pytest.mark.django_db
def test_secret_page_refuses_other_actions_and_can_be_cancelled(user, session):
    row = secret_request(user, session)
    client = browser(user)
    assert client.post(path_of(row), {"action": "continue"}).status_code == 400
    assert client.post(path_of(row), {"action": "cancel"}).status_code == 200
    assert refresh(row).status == "cancelled" and not StoredSecret.objects.exists()


@pytest.mark.django_db
def test_connections_page_sends_an_anonymous_visitor_to_login():
    response = Client().get("/elicitation/connections/")
    assert (response.status_code, response["Location"]) == (302, "/accounts/login/?next=/elicitation/connections/")


@pytest.mark.django_db
def test_connections_page_lists_the_enabled_providers(user, provider):
    ThirdPartyProvider.objects.create(slug="off", name="Switched off", client_id="x", enabled=False)
    response = browser(user).get("/elicitation/connections/")
    assert response.status_code == 200 and response["X-Frame-Options"] == "DENY"
    html = response.content.decode()
    assert f"<h2>{PROVIDER_NAME} <small>(site.example)</small></h2>" in html
    assert "Not connected." in html and "Switched off" not in html
    (form,) = forms_of(html)
    assert form["fields"]["provider"] == "demo"


@pytest.mark.django_db
def test_connections_page_connect_redirects_to_the_provider_without_an_elicitation(user, provider):
    client = browser(user)
    response = client.post("/elicitation/connections/", {"action": "connect", "provider": "demo"})
    assert response.status_code == 303
    assert response["Location"].startswith(f"{SITE}/oauth/authorize?response_type=code&client_id=demo-provider-client&")
    state = query_of(response["Location"])["state"]
    assert client.session[SESSION_KEY][state]["elicitation"] == ""
    assert not Elicitation.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("action", "slug"), [("connect", "nope"), ("explode", "demo"), ("disconnect", "")])
def test_connections_page_refuses_unknown_actions_and_providers(user, provider, action, slug):
    response = browser(user).post("/elicitation/connections/", {"action": action, "provider": slug})
    assert response.status_code == 400
