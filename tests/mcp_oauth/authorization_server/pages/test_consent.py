"""The consent form (mcp_oauth.authorization_server.pages.consent): tampered resource or client not used, single use, an error page without its transaction, prompt handling, the page's contents, CSRF, denial with iss."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from oauth2_provider.models import get_grant_model

from tests.mcp_oauth.authorization_server.test_views import (
    ISSUER,
    RESOURCE,
    logged_in,  # noqa: F401 - fixtures
)
from tests.support.oauth_helpers import (
    REDIRECT_URI,
    authorize_params,
    consent,
    get_code,
    pkce_pair,
    redirect_query,
)

pytestmark = pytest.mark.django_db


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
