"""RFC 9207: exactly one ``iss`` on every authorization response, errors included (MCP 2026-07-28)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from tests.support.oauth_helpers import authorize_params, consent, pkce_pair

pytestmark = pytest.mark.django_db

ISSUER = "http://testserver"


@pytest.fixture
def logged_in(client, user, resource, public_app):
    client.force_login(user)
    return client


def redirected_iss(response) -> tuple[str, list[str]]:
    assert response.status_code in (302, 303), (response.status_code, response.content[:300])
    query = parse_qs(urlsplit(response["Location"]).query)
    return query.get("error", [""])[0], query.get("iss", [])


@pytest.mark.parametrize(
    "extra, error",
    [
        ({"scope": "mcp nonsense"}, "invalid_scope"),
        ({"resource": "https://elsewhere.example/mcp"}, "invalid_target"),
        ({"code_challenge_method": "plain"}, "invalid_request"),
        ({"prompt": "none"}, "consent_required"),
        ({"response_type": "token"}, "unsupported_response_type"),
    ],
)
def test_error_redirects_carry_iss(logged_in, public_app, extra, error):
    _, challenge = pkce_pair()
    response = logged_in.get("/oauth/authorize?" + urlencode(authorize_params(public_app, challenge, **extra)))
    assert redirected_iss(response) == (error, [ISSUER])


def test_denial_and_success_carry_iss(logged_in, public_app):
    _, challenge = pkce_pair()
    assert redirected_iss(consent(logged_in, authorize_params(public_app, challenge), allow=False)) == (
        "access_denied",
        [ISSUER],
    )
    _, challenge = pkce_pair()
    assert redirected_iss(consent(logged_in, authorize_params(public_app, challenge))) == ("", [ISSUER])


def test_metadata_advertises_iss_support(client, resource):
    data = client.get("/.well-known/oauth-authorization-server").json()
    assert data["authorization_response_iss_parameter_supported"] is True
    assert data["issuer"] == ISSUER
