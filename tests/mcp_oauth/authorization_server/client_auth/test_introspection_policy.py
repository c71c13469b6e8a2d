"""Who may introspect what (RFC 7662 §4): only clients marked as resource servers, only tokens
whose audience is one of their resources; everyone else learns ``{"active": false}`` (§2.2)."""

from __future__ import annotations

import pytest
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.models import ClientProfile, ProtectedResource
from tests.support.oauth_helpers import basic

pytestmark = pytest.mark.django_db


@pytest.fixture
def other_resource(resource):
    return ProtectedResource.objects.create(uri="https://other.example.com/mcp", name="other")


@pytest.fixture
def resource_server(resource):
    """A confidential client marked as the resource server of the default resource: ``(app, secret)``."""
    Application = get_application_model()
    app = Application(name="rs", client_type="confidential", authorization_grant_type="client-credentials")
    secret = app.client_secret
    app.save()
    ClientProfile.objects.create(application=app).resource_server_for.add(resource)
    return app, secret


def introspect(client, caller, token):
    app, secret = caller
    return client.post("/oauth/introspect", {"token": token}, HTTP_AUTHORIZATION=basic(app.client_id, secret))


def test_a_normal_client_learns_nothing_of_another_clients_token(
    client, service, user, public_app, mint_token, resource
):
    """The attack: any confidential client could read another's token (its user, scopes, expiry)."""
    token = mint_token(user, public_app, "mcp", resource.uri)
    response = introspect(client, service, token)
    assert response.status_code == 200
    assert response.json() == {"active": False}


def test_a_normal_client_learns_nothing_of_its_own_token_either(client, service, user, mint_token, resource):
    app, _ = service
    token = mint_token(None, app, "mcp", resource.uri)
    assert introspect(client, service, token).json() == {"active": False}


def test_the_resource_server_of_the_audience_learns_the_token(
    client, resource_server, user, public_app, mint_token, resource
):
    token = mint_token(user, public_app, "mcp", resource.uri)
    data = introspect(client, resource_server, token).json()
    exp = int(get_access_token_model().objects.get(application=public_app).expires.timestamp())
    assert data == {
        "active": True,
        "scope": "mcp",
        "exp": exp,
        "client_id": public_app.client_id,
        "username": "alice",
        "aud": [resource.uri],
    }


def test_a_resource_server_learns_nothing_of_another_resources_token(
    client, resource_server, user, public_app, mint_token, other_resource
):
    token = mint_token(user, public_app, "mcp", other_resource.uri)
    assert introspect(client, resource_server, token).json() == {"active": False}


def test_a_token_without_audience_is_nobodys(client, resource_server, user, public_app, mint_token):
    token = mint_token(user, public_app, "mcp", None)
    assert introspect(client, resource_server, token).json() == {"active": False}


def test_a_disabled_resource_serves_nobody(client, resource_server, user, public_app, mint_token, resource):
    token = mint_token(user, public_app, "mcp", resource.uri)
    ProtectedResource.objects.filter(pk=resource.pk).update(enabled=False)
    assert introspect(client, resource_server, token).json() == {"active": False}


def test_a_bearer_token_with_the_introspection_scope_does_not_bypass_the_rule(
    client, service, user, public_app, mint_token, resource
):
    """DOT also lets a caller authenticate with a bearer token of scope ``introspection``: its
    client is held to the same rule."""
    app, _ = service
    victim = mint_token(user, public_app, "mcp", resource.uri)
    bearer = mint_token(None, app, "introspection", None)
    response = client.post("/oauth/introspect", {"token": victim}, HTTP_AUTHORIZATION=f"Bearer {bearer}")
    assert response.status_code == 200
    assert response.json() == {"active": False}
    ClientProfile.objects.create(application=app).resource_server_for.add(resource)
    response = client.post("/oauth/introspect", {"token": victim}, HTTP_AUTHORIZATION=f"Bearer {bearer}")
    assert response.json()["active"] is True


def test_an_unknown_token_is_inactive_for_a_resource_server(client, resource_server):
    assert introspect(client, resource_server, "no-such-token").json() == {"active": False}


def test_the_adapter_decides(client, settings, service, user, public_app, mint_token, resource):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "ADAPTER": "tests.mcp_oauth.authorization_server.client_auth.test_introspection_policy.EveryoneMayIntrospect",
    }
    token = mint_token(user, public_app, "mcp", resource.uri)
    assert introspect(client, service, token).json()["active"] is True


from mcp_oauth.adapter import DefaultMCPAdapter  # noqa: E402


class EveryoneMayIntrospect(DefaultMCPAdapter):
    def may_introspect(self, client, token) -> bool:
        return True


def test_the_get_form_of_introspection_follows_the_same_rule(
    client, service, resource_server, user, public_app, mint_token, resource
):
    """DOT also answers ``GET /oauth/introspect?token=…``: same rule."""
    token = mint_token(user, public_app, "mcp", resource.uri)
    for caller, active in ((service, False), (resource_server, True)):
        app, secret = caller
        response = client.get(f"/oauth/introspect?token={token}", HTTP_AUTHORIZATION=basic(app.client_id, secret))
        assert response.status_code == 200 and response.json()["active"] is active


def test_the_admin_marks_a_resource_server(admin_client, service, resource):
    app, _ = service
    ClientProfile.objects.create(application=app)
    page = admin_client.get(f"/admin/oauth2_provider/application/{app.pk}/change/").content.decode()
    assert 'name="mcp_profile-0-resource_server_for"' in page and f'value="{resource.pk}">{resource}<' in page
