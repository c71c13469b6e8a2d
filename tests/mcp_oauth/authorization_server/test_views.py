"""The authorization server's MCP profile: resources, PKCE, iss, consent, tokens."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from oauth2_provider.models import get_access_token_model, get_grant_model

from mcp_oauth.models import ProtectedResource
from tests.support.oauth_helpers import (
    REDIRECT_URI,
    authorize_params,
    consent,
    get_code,
    pkce_pair,
    redirect_query,
    token_request,
)

pytestmark = pytest.mark.django_db

ISSUER = "http://testserver"
RESOURCE = "http://testserver/mcp"


@pytest.fixture
def logged_in(client, user, resource, public_app):
    client.force_login(user)
    return client


def test_token_bound_to_requested_resource(logged_in, public_app):
    code, verifier, query = get_code(logged_in, public_app, resource=RESOURCE)
    assert query["iss"] == ISSUER
    response = token_request(logged_in, public_app, code, verifier, resource=RESOURCE)
    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["token_type"] == "Bearer" and body["refresh_token"]
    token = get_access_token_model().objects.get()
    assert token.resource == [RESOURCE]


def test_no_resource_binds_default_never_unrestricted(logged_in, public_app):
    code, verifier, _ = get_code(logged_in, public_app)
    assert get_grant_model().objects.get().resource == [RESOURCE]
    response = token_request(logged_in, public_app, code, verifier)
    assert response.status_code == 200
    assert get_access_token_model().objects.get().resource == [RESOURCE]


@pytest.mark.parametrize(
    "spelling",
    ["HTTP://TESTSERVER/mcp", "http://testserver:80/mcp", "http://TestServer/mcp/", "http://testserver/mcp/"],
)
def test_other_spellings_of_the_resource_are_the_resource(logged_in, public_app, spelling):
    code, verifier, _ = get_code(logged_in, public_app, resource=spelling)
    response = token_request(logged_in, public_app, code, verifier, resource=spelling)
    assert response.status_code == 200, response.content
    assert get_access_token_model().objects.get().resource == [RESOURCE]


@pytest.mark.parametrize(
    "foreign",
    [
        "https://evil.example/mcp",
        "http://testserver/other",
        "http://testserver/mcp#frag",
        "http://testserver:8080/mcp",
        "https://testserver/mcp",
        "not a uri",
        "urn:example:mcp",
    ],
)
def test_foreign_resource_at_authorize_is_invalid_target(logged_in, public_app, foreign):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge, resource=foreign)
    response = logged_in.get("/oauth/authorize?" + urlencode(params))
    query = redirect_query(response)
    assert query["error"] == "invalid_target"
    assert query["state"] == params["state"]
    assert query["iss"] == ISSUER


def test_two_resources_are_invalid_target(logged_in, public_app):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge)
    params["resource"] = [RESOURCE, "http://testserver/mcp2"]
    ProtectedResource.objects.create(uri="http://testserver/mcp2", scopes="mcp")
    response = logged_in.get("/oauth/authorize?" + urlencode(params, doseq=True))
    assert redirect_query(response)["error"] == "invalid_target"


def test_foreign_resource_at_token_is_invalid_target(logged_in, public_app):
    code, verifier, _ = get_code(logged_in, public_app)
    response = token_request(logged_in, public_app, code, verifier, resource="https://evil.example/mcp")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"
    assert response["Cache-Control"] == "no-store"


def test_token_cannot_switch_to_another_registered_resource(logged_in, public_app):
    ProtectedResource.objects.create(uri="http://testserver/tenant/mcp", scopes="mcp")
    code, verifier, _ = get_code(logged_in, public_app, resource=RESOURCE)
    response = token_request(logged_in, public_app, code, verifier, resource="http://testserver/tenant/mcp")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"


def test_consent_form_tampered_resource_is_not_used(logged_in, public_app):
    from tests.support.oauth_helpers import hidden_fields

    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge)
    page = logged_in.get("/oauth/authorize?" + urlencode(params))
    form = hidden_fields(page.content.decode())
    form["allow"] = "Authorize"
    form["resource"] = "https://evil.example/mcp"
    response = logged_in.post("/oauth/authorize?" + urlencode(params), form)
    assert "code" in redirect_query(response)
    assert get_grant_model().objects.get().resource == [RESOURCE]


def test_consent_form_swapped_client_is_not_used(logged_in, user, public_app):
    """A16: the approval applies to the request the user saw, not to a rewritten form."""
    from oauth2_provider.models import get_application_model

    from tests.support.oauth_helpers import hidden_fields

    other = get_application_model().objects.create(
        name="Other",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="https://other.example/cb",
    )
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge)
    form = hidden_fields(logged_in.get("/oauth/authorize?" + urlencode(params)).content.decode())
    form.update(
        {
            "allow": "Authorize",
            "client_id": other.client_id,
            "redirect_uri": "https://other.example/cb",
            "scope": "mcp profile",
        }
    )
    response = logged_in.post("/oauth/authorize", form)
    assert response["Location"].startswith(REDIRECT_URI + "?")
    grant = get_grant_model().objects.get()
    assert grant.application == public_app and grant.scope == "mcp"


def test_consent_form_is_single_use(logged_in, public_app):
    from tests.support.oauth_helpers import hidden_fields

    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge)
    form = hidden_fields(logged_in.get("/oauth/authorize?" + urlencode(params)).content.decode())
    form["allow"] = "Authorize"
    assert logged_in.post("/oauth/authorize", form).status_code == 303
    again = logged_in.post("/oauth/authorize", form)
    assert again.status_code == 400 and "Location" not in again
    assert get_grant_model().objects.count() == 1


@pytest.mark.parametrize("drop", ["transaction", "client_id"])
def test_consent_form_without_transaction_or_fields_is_an_error_page(logged_in, public_app, drop):
    from tests.support.oauth_helpers import hidden_fields

    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge)
    form = hidden_fields(logged_in.get("/oauth/authorize?" + urlencode(params)).content.decode())
    form["allow"] = "Authorize"
    form.pop(drop)
    response = logged_in.post("/oauth/authorize", form)
    if drop == "transaction":
        assert response.status_code == 400 and b"invalid_request" in response.content
    else:  # the stored request fills it in
        assert response.status_code == 303
    assert "Location" not in response or response["Location"].startswith(REDIRECT_URI)


def test_approval_prompt_auto_still_asks(logged_in, public_app):
    get_code(logged_in, public_app)
    _, challenge = pkce_pair()
    response = logged_in.get(
        "/oauth/authorize?" + urlencode(authorize_params(public_app, challenge, approval_prompt="auto"))
    )
    assert response.status_code == 200 and b"authorizationForm" in response.content


def test_prompt_none_without_login_is_a_page_not_a_redirect(client, resource, public_app):
    _, challenge = pkce_pair()
    response = client.get("/oauth/authorize?" + urlencode(authorize_params(public_app, challenge, prompt="none")))
    assert response.status_code == 400 and "Location" not in response
    assert b"login_required" in response.content


def test_prompt_none_with_login_is_consent_required(logged_in, public_app):
    _, challenge = pkce_pair()
    response = logged_in.get("/oauth/authorize?" + urlencode(authorize_params(public_app, challenge, prompt="none")))
    query = redirect_query(response)
    assert query["error"] == "consent_required" and query["iss"] == ISSUER


@pytest.mark.parametrize(
    "redirect", ["https://CLIENT.example.com/cb", "HTTPS://client.example.com/cb", "http://127.0.0.1:8080/callback/"]
)
def test_redirect_uri_is_an_exact_string_match(logged_in, public_app, redirect):
    _, challenge = pkce_pair()
    response = logged_in.get(
        "/oauth/authorize?" + urlencode(authorize_params(public_app, challenge, redirect_uri=redirect))
    )
    assert response.status_code == 400 and "Location" not in response


@pytest.mark.parametrize(
    "pkce, description",
    [
        ({"code_challenge": None, "code_challenge_method": None}, "code_challenge"),
        ({"code_challenge_method": None}, "code_challenge_method"),
        ({"code_challenge_method": "plain"}, "S256"),
        ({"code_challenge_method": "S512"}, ""),
    ],
)
def test_pkce_refused_before_consent(logged_in, public_app, pkce, description):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge, **pkce)
    response = logged_in.get("/oauth/authorize?" + urlencode(params))
    # Refused with a redirect to the (validated) client, not a consent page.
    assert response.status_code == 302
    query = redirect_query(response)
    assert query["error"] == "invalid_request"
    assert description.lower() in query.get("error_description", "").lower().replace(" ", "_")
    assert query["iss"] == ISSUER


def test_plain_in_tampered_consent_form_is_not_used(logged_in, public_app):
    from tests.support.oauth_helpers import hidden_fields

    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge)
    page = logged_in.get("/oauth/authorize?" + urlencode(params))
    form = hidden_fields(page.content.decode())
    form["allow"] = "Authorize"
    form["code_challenge_method"] = "plain"
    logged_in.post("/oauth/authorize?" + urlencode(params), form)
    assert get_grant_model().objects.get().code_challenge_method == "S256"


def test_duplicate_code_challenge_is_invalid_request(logged_in, public_app):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge)
    query = urlencode(params) + "&code_challenge=" + challenge
    assert redirect_query(logged_in.get("/oauth/authorize?" + query))["error"] == "invalid_request"


def test_wrong_verifier_is_invalid_grant(logged_in, public_app):
    code, _, _ = get_code(logged_in, public_app)
    response = token_request(logged_in, public_app, code, "x" * 50)
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"


def _mcp_status(client, token):
    return client.post(
        "/mcp",
        "{}",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_ACCEPT="application/json, text/event-stream",
    ).status_code


def test_code_replay_is_refused_and_revokes_what_it_issued(logged_in, public_app):
    from mcp_oauth.signals import authorization_code_replayed

    seen = []
    authorization_code_replayed.connect(lambda **kw: seen.append(kw), weak=False, dispatch_uid="test-replay")
    try:
        code, verifier, _ = get_code(logged_in, public_app)
        first = token_request(logged_in, public_app, code, verifier).json()
        assert _mcp_status(logged_in, first["access_token"]) != 401
        replay = token_request(logged_in, public_app, code, verifier)
        assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
        # the tokens issued from the code are dead
        assert _mcp_status(logged_in, first["access_token"]) == 401
        refresh = logged_in.post(
            "/oauth/token",
            {"grant_type": "refresh_token", "refresh_token": first["refresh_token"], "client_id": public_app.client_id},
        )
        assert refresh.status_code == 400
        assert len(seen) == 1
    finally:
        authorization_code_replayed.disconnect(dispatch_uid="test-replay")


def test_code_replay_with_wrong_verifier_revokes_nothing(logged_in, public_app):
    code, verifier, _ = get_code(logged_in, public_app)
    first = token_request(logged_in, public_app, code, verifier).json()
    replay = token_request(logged_in, public_app, code, "w" * 50)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert _mcp_status(logged_in, first["access_token"]) != 401


def test_redeemed_code_is_stored_hashed(logged_in, public_app):
    from mcp_oauth.models import RedeemedAuthorizationCode

    code, verifier, _ = get_code(logged_in, public_app)
    token_request(logged_in, public_app, code, verifier)
    stored = RedeemedAuthorizationCode.objects.get()
    assert stored.code_checksum != code and len(stored.code_checksum) == 64
    assert stored.access_token is not None and stored.token_family is not None


def test_unknown_redirect_uri_is_not_redirected(logged_in, public_app):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge, redirect_uri="https://evil.example/cb")
    response = logged_in.get("/oauth/authorize?" + urlencode(params))
    assert response.status_code == 400
    assert "Location" not in response
    assert b"Authorization error" in response.content


@pytest.mark.parametrize("port", ["", ":1", ":8080", ":65535"])
def test_loopback_redirect_matches_any_port(logged_in, public_app, port):
    redirect = f"http://127.0.0.1{port}/callback"
    code, verifier, _ = get_code(logged_in, public_app, redirect_uri=redirect)
    response = token_request(logged_in, public_app, code, verifier, redirect_uri=redirect)
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(
    "redirect",
    [
        "https://client.example.com/cb/",
        "https://client.example.com/CB",
        "https://client.example.com/cb?x=1",
        "https://client.example.com:8443/cb",
        "http://client.example.com/cb",
        "https://evil.client.example.com/cb",
        "https://client.example.com@evil.example/cb",
        "http://127.0.0.1/other",
    ],
)
def test_redirect_uri_matches_exactly(logged_in, public_app, redirect):
    _, challenge = pkce_pair()
    response = logged_in.get(
        "/oauth/authorize?" + urlencode(authorize_params(public_app, challenge, redirect_uri=redirect))
    )
    assert response.status_code == 400
    assert "Location" not in response


def test_unauthenticated_user_is_sent_to_login_first(client, resource, public_app):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge, scope="nonexistent")
    response = client.get("/oauth/authorize?" + urlencode(params))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_consent_page_shows_client_hosts_scopes_resource_and_is_not_frameable(logged_in, public_app):
    _, challenge = pkce_pair()
    response = logged_in.get("/oauth/authorize?" + urlencode(authorize_params(public_app, challenge)))
    html = response.content.decode()
    assert response["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]
    assert response["Referrer-Policy"] == "same-origin"
    assert "Test client" in html
    assert 'id="redirect-host">127.0.0.1<' in html
    assert "Use the demo MCP tools on your behalf" in html
    assert RESOURCE in html
    assert "csrfmiddlewaretoken" in html
    # one redirect URI is https, so no loopback-only warning
    assert "loopback-warning" not in html


def test_consent_page_warns_when_every_redirect_is_loopback(logged_in, public_app):
    public_app.redirect_uris = "http://127.0.0.1/callback http://localhost/callback"
    public_app.registration_source = "dcr"
    public_app.save()
    _, challenge = pkce_pair()
    html = logged_in.get("/oauth/authorize?" + urlencode(authorize_params(public_app, challenge))).content.decode()
    assert 'id="loopback-warning"' in html
    assert 'id="client-dynamic"' in html


def test_consent_post_needs_csrf(user, resource, public_app):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge)
    from tests.support.oauth_helpers import hidden_fields

    form = hidden_fields(browser.get("/oauth/authorize?" + urlencode(params)).content.decode())
    form.pop("csrfmiddlewaretoken")
    form["allow"] = "Authorize"
    assert browser.post("/oauth/authorize?" + urlencode(params), form).status_code == 403
    assert not get_grant_model().objects.exists()


def test_denied_consent_redirects_access_denied_with_iss(logged_in, public_app):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge)
    query = redirect_query(consent(logged_in, params, allow=False))
    assert query["error"] == "access_denied"
    assert query["iss"] == ISSUER
    assert query["state"] == params["state"]


def test_refresh_keeps_binding_and_rotates(logged_in, public_app, settings):
    # No grace window: an immediate reuse is a reuse (tests/mcp_oauth/authorization_server/test_rotation.py covers the window).
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REFRESH_TOKEN_GRACE_SECONDS": 0}
    code, verifier, _ = get_code(logged_in, public_app, resource=RESOURCE)
    first = token_request(logged_in, public_app, code, verifier).json()
    refreshed = logged_in.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": first["refresh_token"], "client_id": public_app.client_id},
    )
    assert refreshed.status_code == 200, refreshed.content
    second = refreshed.json()
    assert second["refresh_token"] != first["refresh_token"]
    newest = get_access_token_model().objects.order_by("-id").first()
    assert newest.resource == [RESOURCE]
    # reusing the old refresh token is refused and revokes the family
    reuse = logged_in.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": first["refresh_token"], "client_id": public_app.client_id},
    )
    assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
    after = logged_in.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": second["refresh_token"], "client_id": public_app.client_id},
    )
    assert after.status_code == 400


def test_refresh_to_another_resource_is_invalid_target(logged_in, public_app):
    ProtectedResource.objects.create(uri="http://testserver/tenant/mcp", scopes="mcp")
    code, verifier, _ = get_code(logged_in, public_app)
    first = token_request(logged_in, public_app, code, verifier).json()
    response = logged_in.post(
        "/oauth/token",
        {
            "grant_type": "refresh_token",
            "refresh_token": first["refresh_token"],
            "client_id": public_app.client_id,
            "resource": "http://testserver/tenant/mcp",
        },
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_target"


@pytest.mark.parametrize(
    "data, error",
    [
        ({"grant_type": "password", "username": "alice", "password": "x"}, "unsupported_grant_type"),
        ({"grant_type": "nonsense"}, "unsupported_grant_type"),
        ({}, "invalid_request"),
        ({"grant_type": "urn:ietf:params:oauth:grant-type:device_code"}, "unsupported_grant_type"),
        ({"grant_type": "authorization_code", "code": "nope", "redirect_uri": REDIRECT_URI}, "invalid_client"),
    ],
)
def test_token_endpoint_errors_are_oauth_errors(client, resource, public_app, data, error):
    response = client.post("/oauth/token", data)
    assert 400 <= response.status_code < 500
    assert response.json()["error"] == error
    assert response["Cache-Control"] == "no-store"


def test_implicit_response_type_is_refused(logged_in, public_app):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge, response_type="token")
    response = logged_in.get("/oauth/authorize?" + urlencode(params))
    assert response.status_code in (302, 400)
    if response.status_code == 302:
        assert redirect_query(response)["error"] == "unsupported_response_type"
    assert not get_access_token_model().objects.exists()


def test_issued_tokens_are_long_random_and_stored_hashed(logged_in, public_app):
    code, verifier, _ = get_code(logged_in, public_app)
    body = token_request(logged_in, public_app, code, verifier).json()
    assert len(body["access_token"]) >= 22 and len(body["refresh_token"]) >= 22
    stored = get_access_token_model().objects.get()
    assert stored.token != body["access_token"]
    assert body["access_token"] not in json.dumps(list(get_access_token_model().objects.values()), default=str)


@pytest.mark.parametrize("response_type", ["code token", "token code", "code id_token", "code id_token token"])
def test_hybrid_response_types_are_unsupported(logged_in, public_app, response_type):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge, response_type=response_type)
    response = logged_in.get("/oauth/authorize?" + urlencode(params))
    assert response.status_code == 302, response.content
    query = redirect_query(response)
    assert query["error"] == "unsupported_response_type"
    assert query["state"] == params["state"]
    assert "#" not in response["Location"]


def test_public_client_credentials_grant_is_unauthorized_client(client, public_app):
    response = client.post("/oauth/token", {"grant_type": "client_credentials", "client_id": public_app.client_id})
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "unauthorized_client"
    assert response["Cache-Control"] == "no-store"
    # an unknown client stays invalid_client
    unknown = client.post("/oauth/token", {"grant_type": "client_credentials", "client_id": "nobody"})
    assert unknown.status_code == 401 and unknown.json()["error"] == "invalid_client"
