"""Django-level checks of what the pages say: the login page's application and site, the connections page's
confirmations, and a clear 400 for a POST without a recognised action."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from cryptography.fernet import Fernet
from django.test import Client

from elicitation.models import StoredSecret, ThirdPartyConnection
from tests.support.elicitation_helpers import PASSWORD, SITE, demo_provider

pytestmark = pytest.mark.django_db


def login_page(next_url: str) -> str:
    response = Client().get("/accounts/login/?" + urlencode({"next": next_url}))
    assert response.status_code == 200
    return response.content.decode()


def test_login_page_names_the_application_and_the_site(resource, public_app):
    html = login_page(f"/oauth/authorize?client_id={public_app.client_id}&response_type=code")
    assert 'id="login-client">Test client<' in html
    assert 'id="login-site">django-mcp-authz demo<' in html and "(testserver)" in html


def test_login_page_names_the_host_of_a_cimd_client_it_has_not_fetched(resource):
    html = login_page("/oauth/authorize?client_id=https%3A%2F%2Fapp.example.org%2Fclient.json")
    assert 'id="login-client">app.example.org<' in html and "An application from" in html


def test_login_page_of_an_unknown_client_names_no_application(resource):
    html = login_page("/oauth/authorize?client_id=unknown")
    assert 'id="login-context">An application\nwants to use' in html and 'id="login-client"' not in html


@pytest.mark.parametrize(
    "next_url", ["/", "https://evil.example/oauth/authorize?client_id=x", "/oauth/authorize?client_id=a&client_id=b"]
)
def test_login_page_says_nothing_it_cannot_vouch_for(resource, next_url):
    assert 'id="login-context"' not in login_page(next_url)


def test_connections_page_confirms_and_refuses_unknown_actions(user, settings):
    settings.ELICITATION = {"ENCRYPTION_KEYS": [Fernet.generate_key().decode()]}
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": SITE}
    demo_provider()
    StoredSecret.objects.create(user=user, name="demo_api_key", value_encrypted="x")
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    deleted = client.post("/elicitation/connections/", {"action": "forget", "name": "demo_api_key"}, follow=True)
    assert "Deleted the stored value demo_api_key." in deleted.content.decode()
    assert not StoredSecret.objects.filter(user=user).exists()
    not_connected = client.post("/elicitation/connections/", {"action": "disconnect", "provider": "demo"}, follow=True)
    assert "was not connected; nothing was changed." in not_connected.content.decode()
    unknown = client.post("/elicitation/connections/", {"action": "explode", "provider": "demo"})
    assert unknown.status_code == 400
    assert 'id="form-error">Nothing was changed: the form did not say what to do.<' in unknown.content.decode()
    assert ThirdPartyConnection.objects.count() == 0


def test_home_page_links_the_account_pages(user):
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    html = client.get("/").content.decode()
    assert 'href="/oauth/connected-apps/"' in html and 'href="/elicitation/connections/"' in html


@pytest.mark.parametrize(
    ("policy", "warned"),
    [
        ("no-referrer", True),
        (["no-referrer", "strict-origin-when-cross-origin"], True),
        ("No-Referrer, same-origin", True),
        ("same-origin", False),
        (None, False),
    ],
)
def test_a_no_referrer_policy_is_reported(settings, policy, warned):
    """Chromium sends ``Origin: null`` on form POSTs under ``no-referrer`` and CSRF refuses them."""
    from django.core.checks import run_checks

    settings.SECURE_REFERRER_POLICY = policy
    assert ("mcp_oauth.W032" in {message.id for message in run_checks()}) is warned
