"""JWT access tokens (RFC 9068) on the site: the system checks of keys and settings, and introspection
(RFC 7662) of a JWT from its row. The other behaviours have a test file named after their module:
authorization_server/tokens/test_jwt_access.py, test_signing_keys.py, authorization_server/test_jwks_view.py,
resource_server/test_jwt_tokens.py, test_jwt_keys.py, test_jwt_revocation.py."""

from __future__ import annotations

import pytest

from mcp_oauth.authorization_server.tokens import signing_keys
from tests.support.jwt_access_tokens import jwt_resource, logged_in  # noqa: F401 - fixtures
from tests.support.oauth_helpers import first_pair

pytestmark = pytest.mark.django_db


def test_checks_report_a_jwt_resource_without_a_signing_key_and_bad_settings(resource, settings, monkeypatch):
    from mcp_oauth.resource_server.checks import check_jwt_access_token_keys, check_jwt_access_token_settings

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOKEN_CACHE_SHARED": True}
    assert check_jwt_access_token_keys(None, databases=["default"]) == []
    resource.jwt_access_tokens = True
    resource.save()
    assert [m.id for m in check_jwt_access_token_keys(None, databases=["default"])] == ["mcp_oauth.E170"]
    assert check_jwt_access_token_keys(None) == []  # a database check only
    signing_keys.rotate()
    assert check_jwt_access_token_keys(None, databases=["default"]) == []
    # a token cache of each process's own in a multi-process site: the deny-list reaches no other
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOKEN_CACHE_SHARED": False}
    monkeypatch.setenv("WEB_CONCURRENCY", "4")
    assert [m.id for m in check_jwt_access_token_keys(None, databases=["default"])] == ["mcp_oauth.W173"]
    assert check_jwt_access_token_settings(None) == []
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "JWT_ACCESS_TOKEN_ALGORITHM": "HS256",
        "JWT_ACCESS_TOKEN_ENCRYPTION_KEYS": ["short"],
        "JWKS_MAX_AGE_SECONDS": -1,
    }
    assert sorted(m.id for m in check_jwt_access_token_settings(None)) == [
        "mcp_oauth.E171",
        "mcp_oauth.E171",
        "mcp_oauth.E172",
    ]


def test_introspection_answers_for_a_jwt_from_its_row(logged_in, jwt_resource, public_app):
    from oauth2_provider.models import get_application_model

    from mcp_oauth.models import ClientProfile
    from tests.support.oauth_helpers import basic

    Application = get_application_model()
    rs = Application(name="rs", client_type="confidential", authorization_grant_type="client-credentials")
    secret = rs.client_secret
    rs.save()
    ClientProfile.objects.create(application=rs).resource_server_for.add(jwt_resource)
    token = first_pair(logged_in, public_app)["access_token"]
    answer = logged_in.post("/oauth/introspect", {"token": token}, HTTP_AUTHORIZATION=basic(rs.client_id, secret))
    assert answer.status_code == 200
    assert answer.json()["active"] is True and answer.json()["client_id"] == public_app.client_id
