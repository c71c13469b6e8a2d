"""The authorization endpoint and its consent page (mcp_oauth.authorization_server.pages.authorize): prompt=none, an unknown redirect URI, login first, implicit and hybrid response types refused."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from oauth2_provider.models import get_access_token_model

from tests.mcp_oauth.authorization_server.test_views import (  # noqa: F401 - fixtures and helpers
    ISSUER,
    logged_in,
)
from tests.support.oauth_helpers import (
    authorize_params,
    pkce_pair,
    redirect_query,
)

pytestmark = pytest.mark.django_db


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


def test_unknown_redirect_uri_is_not_redirected(logged_in, public_app):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge, redirect_uri="https://evil.example/cb")
    response = logged_in.get("/oauth/authorize?" + urlencode(params))
    assert response.status_code == 400
    assert "Location" not in response
    assert b"Authorization error" in response.content


def test_unauthenticated_user_is_sent_to_login_first(client, resource, public_app):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge, scope="nonexistent")
    response = client.get("/oauth/authorize?" + urlencode(params))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_implicit_response_type_is_refused(logged_in, public_app):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge, response_type="token")
    response = logged_in.get("/oauth/authorize?" + urlencode(params))
    assert response.status_code in (302, 400)
    if response.status_code == 302:
        assert redirect_query(response)["error"] == "unsupported_response_type"
    assert not get_access_token_model().objects.exists()


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
