"""DPoP in the discovery documents (mcp_oauth.dpop.metadata): dpop_signing_alg_values_supported in both, gone when DPoP is off."""

from __future__ import annotations

ALGS = ["ES256", "ES384", "PS256", "RS256", "EdDSA"]


def test_metadata_advertises_dpop(client, resource):
    as_metadata = client.get("/.well-known/oauth-authorization-server").json()
    assert as_metadata["dpop_signing_alg_values_supported"] == ALGS
    prm = client.get("/.well-known/oauth-protected-resource/mcp").json()
    assert prm["dpop_signing_alg_values_supported"] == ALGS
    assert prm["dpop_bound_access_tokens_required"] is False
    resource.dpop_required = True
    resource.save()
    assert client.get("/.well-known/oauth-protected-resource/mcp").json()["dpop_bound_access_tokens_required"] is True


def test_dpop_off_removes_it_from_metadata(client, resource, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DPOP_SIGNING_ALG_VALUES_SUPPORTED": []}
    assert "dpop_signing_alg_values_supported" not in client.get("/.well-known/oauth-authorization-server").json()
    assert "dpop_signing_alg_values_supported" not in client.get("/.well-known/oauth-protected-resource/mcp").json()
