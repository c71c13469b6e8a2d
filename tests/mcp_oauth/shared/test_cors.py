"""CORS of the API endpoints (mcp_oauth.shared.cors): browser clients may send DPoP proofs and read nonces."""

from __future__ import annotations


def test_cors_lets_browser_clients_send_proofs_and_read_nonces(client, resource):
    for path in ("/mcp", "/oauth/token"):
        response = client.options(path, HTTP_ORIGIN="http://localhost:3000", HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST")
        assert "DPoP" in [h.strip() for h in response["Access-Control-Allow-Headers"].split(",")]
