"""In Chromium: the conformance runner's person at the browser (``tests/conformance/user_agent.py``).

Against the live site: it signs in on the site's login page, presses *Authorize* on the real consent
page and reaches the client's loopback redirect URI with a code (what the suite's
``authorization-code-grant`` scenario waits for); with a wrong password it stops at the step that
failed, saves the page, and no code is issued.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from oauth2_provider.models import get_application_model, get_grant_model

from mcp_oauth.models import Consent
from tests.conformance import user_agent
from tests.e2e.test_python_sdk import PASSWORD, USERNAME, live  # noqa: F401 - fixture
from tests.support.browser import chromium_executable, loopback, require_chromium  # noqa: F401 - fixtures
from tests.support.oauth_helpers import pkce_pair

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def authorization_url(live, loopback, chromium_executable, monkeypatch):
    monkeypatch.setattr(user_agent, "CHROMIUM", chromium_executable)
    get_application_model().objects.create(
        client_id="conformance-authorization",
        name="conformance suite (authorization server)",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/callback",
    )
    _, challenge = pkce_pair()
    params = {
        "response_type": "code",
        "client_id": "conformance-authorization",
        "state": "s-123",
        "redirect_uri": loopback.redirect_uri,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": live.mcp_url,
    }
    return live.base + "/oauth/authorize?" + urlencode(params)


def test_signs_in_and_approves_on_the_sites_own_pages(live, loopback, authorization_url, tmp_path):
    reached = user_agent.approve(
        authorization_url,
        username=USERNAME,
        password=PASSWORD,
        callback_prefix=loopback.redirect_uri,
        evidence=tmp_path,
    )
    assert reached.startswith(loopback.redirect_uri + "?")
    query = parse_qs(urlsplit(reached).query)
    assert query["state"] == ["s-123"] and query["iss"] == [live.base] and query["code"][0]
    consent = Consent.objects.get(application__client_id="conformance-authorization")
    assert consent.user.username == USERNAME and consent.resources == [live.mcp_url]
    assert not list(tmp_path.iterdir())  # no evidence saved


def test_a_wrong_password_stops_at_the_consent_step_and_saves_the_page(live, loopback, authorization_url, tmp_path):
    user_agent_timeout = user_agent.STEP_TIMEOUT_MS
    user_agent.STEP_TIMEOUT_MS = 3_000
    try:
        with pytest.raises(user_agent.ApprovalFailed, match=r"could not approve on the consent page \(at .*/login"):
            user_agent.approve(
                authorization_url,
                username=USERNAME,
                password="not-the-password",
                callback_prefix=loopback.redirect_uri,
                evidence=tmp_path,
            )
    finally:
        user_agent.STEP_TIMEOUT_MS = user_agent_timeout
    assert (tmp_path / "authorization-failed.png").stat().st_size > 0
    assert 'name="password"' in (tmp_path / "authorization-failed.html").read_text()
    assert not get_grant_model().objects.exists() and not Consent.objects.exists()
