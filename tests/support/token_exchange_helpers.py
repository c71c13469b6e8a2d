"""Helpers of the token exchange tests (RFC 8693): a subject token, an exchange request, the API resource."""

from __future__ import annotations

from typing import Any

from mcp_oauth.authorization_server.token_exchange.decision import (
    ACCESS_TOKEN_TYPE,
    TOKEN_EXCHANGE_GRANT_TYPE,
    TokenExchangeDecision,
    allow,
)
from mcp_oauth.mcp_server.tools import ToolContext, ToolRegistry
from tests.support.oauth_helpers import first_pair, get_code, token_request

#: Served with ``MCP_OAUTH["TOOL_REGISTRY"] = "tests.support.token_exchange_helpers.REGISTRY"``.
REGISTRY = ToolRegistry("token-exchange-tests")

API_URI = "http://testserver/api"


@REGISTRY.tool
def acting(ctx: ToolContext) -> dict:
    """The call's user, client and actor (RFC 8693 ``act``)."""
    return {"user": ctx.user.get_username(), "client_id": ctx.client_id, "actor": ctx.actor}


MCP_URI = "http://testserver/mcp"


class AllowEveryExchange:
    """Mixed into the default adapter by :func:`allowing_adapter`: every exchange that passed the grant's checks."""

    def token_exchange_decision(self, request, client, subject_token, resource, scopes) -> TokenExchangeDecision:
        return allow()


def allowing_adapter():
    from mcp_oauth.adapter import DefaultMCPAdapter

    return type("AllowingAdapter", (AllowEveryExchange, DefaultMCPAdapter), {})


def api_resource():
    """The reference site's ``<site>/api`` resource (scope ``profile``)."""
    from project.apps import ensure_api_resource

    return ensure_api_resource()


def subject_pair(client, app, scope: str = "mcp profile", **extra: Any) -> dict:
    """A token response for ``app`` (``client`` logged in) with ``scope``, for the MCP resource."""
    if scope == "mcp" and not extra:
        return first_pair(client, app)
    code, verifier, _ = get_code(client, app, scope=scope, **extra)
    response = token_request(client, app, code, verifier)
    assert response.status_code == 200, response.content
    return response.json()


def exchange(client, app, token: str, *, headers: dict | None = None, **params: Any):
    """POST a token-exchange request by ``app`` (public: ``client_id``) for the subject token ``token``;
    ``params`` override or add (None drops one)."""
    data = {
        "grant_type": TOKEN_EXCHANGE_GRANT_TYPE,
        "client_id": app.client_id,
        "subject_token": token,
        "subject_token_type": ACCESS_TOKEN_TYPE,
        "resource": API_URI,
        "scope": "profile",
    }
    data.update(params)
    data = {k: v for k, v in data.items() if v is not None}
    return client.post("/oauth/token", data, **(headers or {}))


def api_profile(client, token: str, scheme: str = "Bearer", **headers):
    """GET the reference site's ``/api/profile`` with ``token``."""
    return client.get("/api/profile", HTTP_AUTHORIZATION=f"{scheme} {token}", **headers)
