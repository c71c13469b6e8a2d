"""The policy adapter (mcp_oauth.adapter): default behaviour, overriding, resolution from the setting."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from mcp_oauth.adapter import DefaultMCPAdapter, get_adapter
from mcp_oauth.authorization_server.client_registry.trust import Verdict
from mcp_oauth.models import AuditEvent
from tests.support.oauth_helpers import authorize_params, pkce_pair, redirect_query

pytestmark = pytest.mark.django_db

INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
)


class SkippingAdapter(DefaultMCPAdapter):
    """Approves every request of the client named "Test client" without the consent page."""

    def can_skip_consent(self, request, application, scopes, resource):
        return application.name == "Test client"

    def describe_client(self, application, verdict=None):
        described = super().describe_client(application, verdict)
        described["name"] = "Described by the adapter"
        return described


class RobotUserAdapter(DefaultMCPAdapter):
    """Maps every token to one service user."""

    robot = None

    def user_for_token(self, access_token):
        return type(self).robot


class DenyingAdapter(DefaultMCPAdapter):
    def trust_verdict(self, application=None, **kwargs):
        return Verdict(decision="denied", reason="adapter says no")


@pytest.fixture
def logged_in(client, user, resource, public_app):
    client.force_login(user)
    return client


def use(settings, cls):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": f"{__name__}.{cls.__name__}"}


def test_default_adapter_is_resolved_once(settings):
    # the reference site names its own adapter (project.mcp_adapter): without it, the default
    settings.MCP_OAUTH = {key: value for key, value in settings.MCP_OAUTH.items() if key != "ADAPTER"}
    first = get_adapter()
    assert type(first) is DefaultMCPAdapter and get_adapter() is first
    use(settings, SkippingAdapter)
    assert type(get_adapter()) is SkippingAdapter


def test_default_asks_consent_every_time(logged_in, public_app):
    _, challenge = pkce_pair()
    page = logged_in.get("/oauth/authorize?" + urlencode(authorize_params(public_app, challenge)))
    assert page.status_code == 200 and b"allow" in page.content


def test_adapter_can_skip_consent_and_it_is_audited(logged_in, public_app, settings):
    use(settings, SkippingAdapter)
    _, challenge = pkce_pair()
    response = logged_in.get("/oauth/authorize?" + urlencode(authorize_params(public_app, challenge)))
    query = redirect_query(response)
    assert query["code"] and query["iss"] == "http://testserver"
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.CONSENT_GRANTED)
    assert event.detail["automatic"] is True


def test_adapter_describes_the_client_on_the_consent_page(logged_in, public_app, settings):
    use(settings, SkippingAdapter)
    public_app.name = "Another"
    public_app.save()
    _, challenge = pkce_pair()
    page = logged_in.get("/oauth/authorize?" + urlencode(authorize_params(public_app, challenge)))
    assert page.status_code == 200 and "Described by the adapter" in page.content.decode()


def test_adapter_trust_verdict_refuses_authorization_and_tokens(logged_in, public_app, settings):
    use(settings, DenyingAdapter)
    _, challenge = pkce_pair()
    page = logged_in.get("/oauth/authorize?" + urlencode(authorize_params(public_app, challenge)))
    assert page.status_code == 403 and "Location" not in page
    token = logged_in.post(
        "/oauth/token", {"grant_type": "refresh_token", "refresh_token": "x", "client_id": public_app.client_id}
    )
    assert token.status_code in (400, 401) and token.json()["error"] == "invalid_client"


def test_adapter_maps_a_token_to_a_user(client, user, other_user, resource, public_app, mint_token, settings):
    use(settings, RobotUserAdapter)
    RobotUserAdapter.robot = other_user
    token = mint_token(user, public_app, resource=resource.uri)
    response = client.post(
        "/mcp",
        data=INITIALIZE,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_ACCEPT="application/json, text/event-stream",
    )
    assert response.status_code == 200
    other_user.is_active = False
    other_user.save()
    refused = client.post(
        "/mcp",
        data=INITIALIZE,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_ACCEPT="application/json, text/event-stream",
    )
    assert refused.status_code == 401 and 'error="invalid_token"' in refused["WWW-Authenticate"]


def test_bad_adapter_setting_is_a_check_error(settings):
    from django.core.checks import run_checks

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": "no.such.Adapter"}
    assert "mcp_oauth.E042" in {m.id for m in run_checks()}
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": "builtins.dict"}
    assert "mcp_oauth.E042" in {m.id for m in run_checks()}
