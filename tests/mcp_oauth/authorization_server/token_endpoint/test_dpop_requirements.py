"""Who must use DPoP (mcp_oauth.authorization_server.token_endpoint.dpop_requirements): a client that requires it (admin flag, registration metadata, CIMD document) and a resource that requires it."""

from __future__ import annotations

import json

from mcp_oauth.models import ClientProfile
from tests.mcp_oauth.dpop.test_proof import MCP_URL, META, PING, TOKEN_URL, exchange, key, logged_in, ping  # noqa: F401 - fixtures
from tests.support.oauth_helpers import REDIRECT_URI


def test_client_that_requires_dpop(logged_in, public_app, key):
    ClientProfile.objects.create(application=public_app, dpop_bound_access_tokens=True)
    refused = exchange(logged_in, public_app)
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_dpop_proof"
    assert exchange(logged_in, public_app, key.proof("POST", TOKEN_URL)).json()["token_type"] == "DPoP"


def test_client_metadata_flag_requires_dpop(logged_in, public_app):
    ClientProfile.objects.create(application=public_app, metadata={"dpop_bound_access_tokens": True})
    refused = exchange(logged_in, public_app)
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_dpop_proof")


def test_resource_that_requires_dpop(logged_in, public_app, key, resource, user, mint_token):
    resource.dpop_required = True
    resource.save()
    refused = exchange(logged_in, public_app)
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_dpop_proof")
    bearer = mint_token(user, public_app, "mcp", resource.uri)
    response = ping(logged_in, bearer, scheme="Bearer")
    assert response.status_code == 401
    header = response["WWW-Authenticate"]
    assert header.startswith('DPoP resource_metadata="http://testserver/.well-known/oauth-protected-resource/mcp"')
    assert 'error="invalid_token"' in header and 'algs="ES256 ES384 PS256 RS256 EdDSA"' in header
    assert "Bearer" not in header
    no_token = logged_in.post("/mcp", data=PING, content_type="application/json")
    assert no_token.status_code == 401
    assert no_token["WWW-Authenticate"].startswith("DPoP resource_metadata=")
    body = exchange(logged_in, public_app, key.proof("POST", TOKEN_URL)).json()
    assert ping(logged_in, body["access_token"], key.proof("POST", MCP_URL, body["access_token"])).status_code == 200


def test_dynamic_registration_opts_in(client, user, resource, key):
    """RFC 9449 §5.2 client metadata at RFC 7591 registration."""
    metadata = {
        "redirect_uris": [REDIRECT_URI],
        "token_endpoint_auth_method": "none",
        "client_name": "dpop client",
        "dpop_bound_access_tokens": True,
    }
    registered = client.post("/oauth/register", json.dumps(metadata), content_type="application/json")
    assert registered.status_code == 201, registered.content
    assert registered.json()["dpop_bound_access_tokens"] is True
    from oauth2_provider.models import get_application_model

    app = get_application_model().objects.get(client_id=registered.json()["client_id"])
    client.force_login(user)
    refused = exchange(client, app)
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_dpop_proof")
    assert exchange(client, app, key.proof("POST", TOKEN_URL)).json()["token_type"] == "DPoP"
    bad = client.post(
        "/oauth/register",
        json.dumps({**metadata, "dpop_bound_access_tokens": "yes"}),
        content_type="application/json",
    )
    assert bad.status_code == 400
    assert bad.json()["error"] == "invalid_client_metadata"


def test_cimd_document_flag_requires_dpop(db):
    """A Client ID Metadata Document with ``dpop_bound_access_tokens: true`` opts its client in."""
    from oauth2_provider.models import get_application_model

    from mcp_oauth.authorization_server.token_endpoint.dpop_requirements import client_requires_dpop
    from mcp_oauth.models import ClientMetadataDocument

    Application = get_application_model()
    url = "https://client.example.com/metadata.json"
    app = Application.objects.create(
        client_id=url, name="cimd", client_type="public", authorization_grant_type="authorization-code"
    )
    document = ClientMetadataDocument.objects.create(
        client_id=url, application=app, document={"client_id": url, "dpop_bound_access_tokens": False}
    )
    assert client_requires_dpop(app) is False
    document.document = {"client_id": url, "dpop_bound_access_tokens": True}
    document.save()
    assert client_requires_dpop(app) is True
