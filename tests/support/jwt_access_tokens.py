"""Fixtures and helpers of the JWT access token tests (RFC 9068): a protected resource that opted
in with a signing key published, a logged-in client, and a token's decoded header and claims.

Import the fixtures into a test module (``from tests.support.jwt_access_tokens import jwt_resource,
logged_in  # noqa: F401 - fixtures``)."""

from __future__ import annotations

import base64
import json

import pytest

from mcp_oauth.authorization_server.tokens import signing_keys

#: The reference site's MCP endpoint (the ``resource`` fixture's URI).
RESOURCE = "http://testserver/mcp"


def segments(token: str) -> tuple[dict, dict]:
    """The decoded JOSE header and claims of a compact JWS (signature not checked)."""
    head, body, _ = token.split(".")
    decode = lambda part: json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))  # noqa: E731
    return decode(head), decode(body)


@pytest.fixture
def jwt_resource(resource):
    """The ``resource`` fixture switched to JWT access tokens, with one signing key (ES256)."""
    resource.jwt_access_tokens = True
    resource.save()
    signing_keys.rotate()
    return resource


@pytest.fixture
def logged_in(client, user):
    client.force_login(user)
    return client
