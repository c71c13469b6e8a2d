"""The authorization request's ``state`` is bounded (issue #28: 20,000 characters were accepted)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from tests.support.oauth_helpers import REDIRECT_URI, authorize_params, hidden_fields, pkce_pair

pytestmark = pytest.mark.django_db


def authorize(client, app, state):
    _, challenge = pkce_pair()
    return client.get("/oauth/authorize?" + urlencode(authorize_params(app, challenge, state=state)))


def test_a_state_of_the_documented_length_is_accepted(client, user, resource, public_app):
    client.force_login(user)
    response = authorize(client, public_app, "s" * 2048)
    assert response.status_code == 200
    assert hidden_fields(response.content.decode())["state"] == "s" * 2048


@pytest.mark.parametrize("length", [2049, 20_000])
def test_a_longer_state_is_refused_with_invalid_request(client, user, resource, public_app, length):
    """RFC 6749 §4.1.2.1: the client and redirect URI are valid, so the error is redirected; the state
    is not echoed (it is what is refused), the description names it and its limit."""
    client.force_login(user)
    response = authorize(client, public_app, "s" * length)
    assert response.status_code == 302
    location = urlsplit(response["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == REDIRECT_URI
    query = parse_qs(location.query)
    assert query == {
        "error": ["invalid_request"],
        "error_description": ["state is longer than 2048 characters."],
        "iss": ["http://testserver"],
    }


def test_the_limit_is_a_setting(client, settings, user, resource, public_app):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "AUTHORIZATION_STATE_MAX_LENGTH": 64}
    client.force_login(user)
    assert authorize(client, public_app, "s" * 64).status_code == 200
    refused = authorize(client, public_app, "s" * 65)
    assert parse_qs(urlsplit(refused["Location"]).query)["error_description"] == ["state is longer than 64 characters."]


def test_a_long_state_posted_with_the_consent_form_is_not_used(client, user, resource, public_app):
    """The hidden fields can be tampered with: the consent POST answers with the state of the
    checked GET request (the consent transaction), never a posted one."""
    client.force_login(user)
    page = authorize(client, public_app, "ok")
    fields = {**hidden_fields(page.content.decode()), "state": "s" * 2049, "allow": "Authorize"}
    response = client.post("/oauth/authorize", fields)
    assert response.status_code == 303
    query = parse_qs(urlsplit(response["Location"]).query)
    assert query["state"] == ["ok"] and len(query["code"]) == 1
