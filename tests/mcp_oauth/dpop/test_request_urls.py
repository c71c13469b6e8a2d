"""The request URL a DPoP proof's htu may name (mcp_oauth.dpop.request_urls): either loopback spelling on a development site."""

from __future__ import annotations

from tests.mcp_oauth.dpop.test_proof import (
    PING,
    key,  # noqa: F401 - fixtures
)
from tests.support.dpop_helpers import DPoPKey


def test_htu_in_either_loopback_spelling(client, settings, user, public_app, mint_token):
    """On a loopback development site the proof may name the URL in the spelling the client used
    (mcp_oauth.shared.origins); ``BASE_URL``'s spelling is always the request URL (behind a proxy too)."""
    from datetime import timedelta

    from django.utils import timezone

    from mcp_oauth.dpop.bindings import bind_tokens
    from mcp_oauth.resource_server.default_resource import ensure_default_resource

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": "http://127.0.0.1:8000"}
    resource = ensure_default_resource()
    key = DPoPKey()
    token = mint_token(user, public_app, "mcp", resource.uri)
    bind_tokens(key.thumbprint, [(token, "access_token", timezone.now() + timedelta(hours=1))])
    host = {"HTTP_HOST": "localhost:8000"}
    for htu, status in (
        ("http://localhost:8000/mcp", 200),
        ("http://127.0.0.1:8000/mcp", 200),
        ("http://LOCALHOST:8000/mcp?x=1#f", 200),  # case-insensitive host, no query or fragment
        ("http://localhost:8001/mcp", 401),
        ("https://localhost:8000/mcp", 401),
        ("http://example.com:8000/mcp", 401),
    ):
        response = client.post(
            "/mcp",
            data=PING,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"DPoP {token}",
            HTTP_DPOP=key.proof("POST", htu, token),
            HTTP_ACCEPT="application/json, text/event-stream",
            HTTP_MCP_PROTOCOL_VERSION="2026-07-28",
            HTTP_MCP_METHOD="server/discover",
            **host,
        )
        assert response.status_code == status, (htu, response.content)
