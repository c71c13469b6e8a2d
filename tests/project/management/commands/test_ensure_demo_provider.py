"""The reference site's ``ensure_demo_provider`` command: this site (or another instance) as its own third-party provider."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.hashers import check_password
from django.core.management import call_command
from django.core.management.base import CommandError

from elicitation.models import (
    ThirdPartyProvider,
)
from mcp_oauth.models import ProtectedResource
from tests.support.elicitation_keys import (
    Application,
    key,  # noqa: F401 - a fixture
    raw,
    use_keys,
)
from tests.support.live import free_port

pytestmark = pytest.mark.django_db


SITE = "https://site.example.com"


@pytest.fixture
def site(settings, key):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": SITE}
    return SITE


def test_ensure_demo_provider_makes_this_site_its_own_provider(site):
    out = io.StringIO()
    call_command("ensure_demo_provider", stdout=out)
    provider = ThirdPartyProvider.objects.get(slug="demo")
    assert provider.name == "Demo provider (this site)"
    assert (
        provider.issuer,
        provider.authorization_endpoint,
        provider.token_endpoint,
        provider.revocation_endpoint,
        provider.userinfo_endpoint,
        provider.resource,
    ) == (
        SITE,
        f"{SITE}/oauth/authorize",
        f"{SITE}/oauth/token",
        f"{SITE}/oauth/revoke",
        f"{SITE}/api/profile",
        f"{SITE}/api",
    )
    assert (
        provider.scopes,
        provider.iss_parameter_supported,
        provider.use_pkce,
        provider.enabled,
        provider.token_endpoint_auth_method,
        provider.client_id,
    ) == ("profile", True, True, True, "client_secret_basic", "demo-provider-client")
    assert out.getvalue().endswith(
        f"Third-party provider 'demo' -> {SITE} (redirect URI {SITE}/elicitation/callback/demo/).\n"
    )

    # The client secret is stored encrypted, and it is the DOT client's secret on this site.
    plain = provider.client_secret
    assert len(plain) >= 32
    assert plain not in raw(ThirdPartyProvider, provider.pk, "client_secret_encrypted")
    app = Application.objects.get(client_id="demo-provider-client")
    assert check_password(plain, app.client_secret) is True
    assert (app.client_type, app.authorization_grant_type, app.redirect_uris, app.name) == (
        "confidential",
        "authorization-code",
        f"{SITE}/elicitation/callback/demo/",
        "Demo provider connection",
    )
    resource = ProtectedResource.objects.get(uri=f"{SITE}/api")
    assert (resource.name, resource.scopes, resource.enabled) == ("Reference site API", "profile", True)

    # Again: same rows, a new secret on both sides.
    call_command("ensure_demo_provider", stdout=io.StringIO())
    assert ThirdPartyProvider.objects.filter(slug="demo").count() == 1
    assert Application.objects.filter(client_id="demo-provider-client").count() == 1
    assert ProtectedResource.objects.filter(uri=f"{SITE}/api").count() == 1
    second = ThirdPartyProvider.objects.get(slug="demo").client_secret
    assert second != plain
    assert check_password(second, Application.objects.get(client_id="demo-provider-client").client_secret) is True


def test_ensure_demo_provider_for_another_instance(site):
    call_command(
        "ensure_demo_provider",
        "--issuer",
        "https://other.example.org/",
        "--client-id",
        "c-1",
        "--client-secret",
        "s" * 20,
        "--slug",
        "remote",
        stdout=io.StringIO(),
    )
    provider = ThirdPartyProvider.objects.get(slug="remote")
    assert (
        provider.name,
        provider.issuer,
        provider.token_endpoint,
        provider.resource,
        provider.client_id,
        provider.client_secret,
    ) == (
        "Demo provider (https://other.example.org)",
        "https://other.example.org",
        "https://other.example.org/oauth/token",
        "https://other.example.org/api",
        "c-1",
        "s" * 20,
    )
    assert not Application.objects.exists()  # no client on this site for another instance


@pytest.mark.parametrize("given", [[], ["--client-id", "c"], ["--client-secret", "s" * 20]])
def test_ensure_demo_provider_with_issuer_needs_client_credentials(site, given):
    with pytest.raises(CommandError, match="^--client-id and --client-secret are required with --issuer$"):
        call_command("ensure_demo_provider", "--issuer", "https://other.example.org", *given)
    assert not ThirdPartyProvider.objects.exists()


def test_ensure_demo_provider_needs_keys(settings, site):
    use_keys(settings)
    with pytest.raises(CommandError, match=r'^Set ELICITATION\["ENCRYPTION_KEYS"\] first'):
        call_command("ensure_demo_provider")
    assert not ThirdPartyProvider.objects.exists() and not Application.objects.exists()


def test_ensure_demo_provider_refuses_an_unusable_base_url_before_creating_anything(settings, key):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": "http://mcp.example.com"}  # http, not loopback
    with pytest.raises(CommandError) as excinfo:
        call_command("ensure_demo_provider")
    assert str(excinfo.value).startswith("the provider would not be valid (issuer: ")
    assert "Use an https URL (http only on a loopback host)." in str(excinfo.value)
    assert not ThirdPartyProvider.objects.exists()
    assert not Application.objects.exists()


def test_ensure_demo_provider_discovery_failure_is_a_command_error(site):
    port = free_port()
    with pytest.raises(
        CommandError,
        match=rf"^discovery failed: network_error: http://127.0.0.1:{port}/\.well-known/oauth-authorization-server unreachable",
    ):
        call_command(
            "ensure_demo_provider",
            "--issuer",
            f"http://127.0.0.1:{port}",
            "--client-id",
            "c",
            "--client-secret",
            "s" * 20,
            "--discover",
            stdout=io.StringIO(),
        )
