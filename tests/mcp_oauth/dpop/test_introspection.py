"""DPoP in the introspection response (mcp_oauth.dpop.introspection, RFC 9449 §6.2): token_type DPoP and cnf.jkt."""

from __future__ import annotations

from tests.mcp_oauth.dpop.test_proof import TOKEN_URL, dpop_pair, exchange, key, logged_in  # noqa: F401 - fixtures


def test_introspection_names_the_key(logged_in, key, dpop_pair, service, mint_token, user, public_app, resource):
    """RFC 9449 §6.2: an introspected DPoP-bound token says ``token_type: DPoP`` and ``cnf.jkt``."""
    from mcp_oauth.models import ClientProfile
    from tests.support.oauth_helpers import basic

    app, secret = service
    # RFC 7662 §4: only the resource server of the token's audience learns about it
    ClientProfile.objects.create(application=app).resource_server_for.add(resource)
    auth = {"HTTP_AUTHORIZATION": basic(app.client_id, secret)}
    bound = logged_in.post("/oauth/introspect", {"token": dpop_pair["access_token"]}, **auth)
    assert bound.status_code == 200, bound.content
    assert bound.json()["active"] is True
    assert bound.json()["token_type"] == "DPoP"
    assert bound.json()["cnf"] == {"jkt": key.thumbprint}
    plain = logged_in.post("/oauth/introspect", {"token": mint_token(user, public_app, "mcp", resource.uri)}, **auth)
    assert plain.json()["active"] is True
    assert "cnf" not in plain.json()
