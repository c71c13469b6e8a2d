"""End to end: the official MCP Python SDK's ext-auth client providers against the live ASGI server.

* ``ClientCredentialsOAuthProvider`` (``client_secret_basic``) and ``PrivateKeyJWTOAuthProvider``
  (an ES256 key made in the test, registered as the client's ``jwks``): the client credentials
  extension, a machine principal (``whoami`` says ``user: None, machine: true``);
* ``IdentityAssertionOAuthProvider``: an ID-JAG signed by a test enterprise IdP, redeemed with the
  jwt-bearer grant; the tool sees the linked user.

Each discovers the AS from the 401 / its issuer, gets a token bound to the MCP resource, then
``initialize`` → ``tools/call whoami`` in both eras.
"""

from __future__ import annotations

import httpx2
import pytest
from mcp import Client
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.models import ClientProfile, EnterpriseIdentity, EnterpriseIdentityProvider, ProtectedResource
from tests.e2e.test_python_sdk import USERNAME, MemoryStorage, live, run, structured  # noqa: F401 - live is a fixture
from tests.support.jwt_keys import claims, make_key

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

IDP = "https://acme.idp.example"


def machine_client(**profile) -> tuple[object, str]:
    Application = get_application_model()
    app = Application(name="machine", client_type="confidential", authorization_grant_type="client-credentials")
    secret = app.client_secret
    app.save()
    if profile:
        ClientProfile.objects.create(application=app, **profile)
    return app, secret


async def call_whoami(live, auth, mode: str) -> dict:
    async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
        async with Client(streamable_http_client(live.mcp_url, http_client=http), mode=mode) as client:
            result = await client.call_tool("whoami", {})
    assert not result.is_error, result
    return structured(result)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_client_secret_machine_client(live, mode):
    app, secret = machine_client()
    provider = ClientCredentialsOAuthProvider(
        server_url=live.mcp_url,
        storage=MemoryStorage(),
        client_id=app.client_id,
        client_secret=secret,
        scope="mcp",
        issuer=live.base,
    )
    seen = run(call_whoami(live, provider, mode))
    assert seen["user"] is None and seen["machine"] is True
    assert seen["client_id"] == app.client_id and seen["scopes"] == ["mcp"]
    token = get_access_token_model().objects.get(application=app)
    assert token.user is None and token.resource == [live.mcp_url]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_private_key_jwt_machine_client(live, mode):
    key = make_key("ES256")
    app, _ = machine_client(jwks=key.jwks)
    params = SignedJWTParameters(
        issuer=app.client_id, subject=app.client_id, signing_key=key.private_pem, signing_algorithm="ES256"
    )
    provider = PrivateKeyJWTOAuthProvider(
        server_url=live.mcp_url,
        storage=MemoryStorage(),
        client_id=app.client_id,
        assertion_provider=params.create_assertion_provider(),
        scope="mcp",
        issuer=live.base,
    )
    seen = run(call_whoami(live, provider, mode))
    assert seen["user"] is None and seen["machine"] is True and seen["client_id"] == app.client_id
    assert get_access_token_model().objects.get(application=app).resource == [live.mcp_url]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_identity_assertion_provider_with_an_enterprise_idp(live, mode, django_user_model):
    idp_key = make_key("RS256")
    app, secret = machine_client()
    provider_row = EnterpriseIdentityProvider.objects.create(name="Acme", issuer=IDP, jwks=idp_key.jwks)
    provider_row.allowed_clients.add(app)
    provider_row.allowed_resources.add(ProtectedResource.objects.default())
    user = django_user_model.objects.get(username=USERNAME)
    EnterpriseIdentity.objects.create(provider=provider_row, subject="U-demo", user=user)
    issued: list[tuple[str, str]] = []

    async def fetch_id_jag(audience: str, resource: str) -> str:
        issued.append((audience, resource))
        payload = claims(iss=IDP, sub="U-demo", aud=audience, resource=resource, client_id=app.client_id, scope="mcp")
        return idp_key.sign(payload, typ="oauth-id-jag+jwt")

    auth = IdentityAssertionOAuthProvider(
        server_url=live.mcp_url,
        storage=MemoryStorage(),
        client_id=app.client_id,
        client_secret=secret,
        issuer=live.base,
        assertion_provider=fetch_id_jag,
        scope="mcp",
    )
    seen = run(call_whoami(live, auth, mode))
    assert issued == [(live.base, live.mcp_url)]
    assert seen["user"] == USERNAME and seen["machine"] is False and seen["client_id"] == app.client_id
    token = get_access_token_model().objects.get(application=app)
    assert token.user == user and token.resource == [live.mcp_url]
