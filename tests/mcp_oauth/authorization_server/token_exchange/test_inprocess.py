"""The in-process exchange behind ``ToolContext.exchange_token``: the same grant, the subject token's client,
its refusals as ``TokenExchangeError``; and the connected-apps page's revoke killing exchanged tokens."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from django.test import RequestFactory
from oauth2_provider.models import get_access_token_model

from mcp_oauth.authorization_server.token_exchange.inprocess import exchange_token, inprocess_client
from mcp_oauth.mcp_server.transport.context import ToolContext
from mcp_oauth.mcp_server.transport.token_exchange import ExchangedToken, TokenExchangeError
from mcp_oauth.models import AuditEvent, TokenActor
from mcp_oauth.resource_server.cache import token_checksum
from tests.mcp_oauth.dpop.test_proof import TOKEN_URL
from tests.support.dpop_helpers import DPoPKey
from tests.support.oauth_helpers import REDIRECT_URI, get_code
from tests.support.token_exchange_helpers import API_URI, api_resource, exchange, subject_pair


@pytest.fixture
def logged_in(client, user, resource):
    api_resource()
    client.force_login(user)
    return client


def test_exchange_in_process_issues_a_delegated_token(logged_in, public_app):
    subject = subject_pair(logged_in, public_app)
    token = exchange_token(subject["access_token"], API_URI, "profile")
    assert isinstance(token, ExchangedToken)
    assert (token.token_type, token.scope, token.resource) == ("Bearer", "profile", API_URI)
    assert token.issued_token_type == "urn:ietf:params:oauth:token-type:access_token"
    assert token.authorization == f"Bearer {token.access_token}"
    assert token.access_token not in repr(token)
    row = get_access_token_model().objects.get(token_checksum=token_checksum(token.access_token))
    assert row.application == public_app and row.resource == [API_URI]
    assert TokenActor.objects.get(token_checksum=row.token_checksum).act == {"sub": public_app.client_id}
    assert logged_in.get("/api/profile", HTTP_AUTHORIZATION=token.authorization).status_code == 200
    assert inprocess_client() is None  # the client is known only while the exchange runs


def test_scope_may_be_an_iterable(logged_in, public_app):
    subject = subject_pair(logged_in, public_app)
    assert exchange_token(subject["access_token"], API_URI, ["profile"]).scope == "profile"


@pytest.mark.parametrize(
    ("scope", "resource", "error"),
    [
        ("profile admin", API_URI, "invalid_scope"),
        ("profile", "https://elsewhere.example/api", "invalid_target"),
        ("mcp", "http://testserver/mcp", "invalid_target"),  # the reference site's adapter
    ],
)
def test_refusals_are_token_exchange_errors(logged_in, public_app, scope, resource, error):
    subject = subject_pair(logged_in, public_app)
    with pytest.raises(TokenExchangeError) as raised:
        exchange_token(subject["access_token"], resource, scope)
    assert raised.value.error == error
    assert not TokenActor.objects.exists()


def test_unknown_or_empty_subject_token(db):
    with pytest.raises(TokenExchangeError) as raised:
        exchange_token("x" * 43, API_URI, "profile")
    assert raised.value.error == "invalid_grant"
    with pytest.raises(TokenExchangeError) as raised:
        exchange_token("", API_URI, "profile")
    assert raised.value.error == "invalid_request"


def test_dpop_bound_subject_cannot_be_exchanged_in_process(logged_in, public_app):
    key = DPoPKey()
    code, verifier, _ = get_code(logged_in, public_app, scope="mcp profile")
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT_URI,
        "client_id": public_app.client_id,
        "code_verifier": verifier,
    }
    subject = logged_in.post("/oauth/token", data, HTTP_DPOP=key.proof("POST", TOKEN_URL)).json()
    with pytest.raises(TokenExchangeError) as raised:
        exchange_token(subject["access_token"], API_URI, "profile")
    assert raised.value.error == "invalid_grant"
    assert "DPoP" in raised.value.description


def test_the_in_process_client_is_not_reachable_over_http(logged_in, public_app, settings):
    """Over HTTP a confidential client must still authenticate: the in-process path is a context variable."""
    from oauth2_provider.models import get_application_model

    Application = get_application_model()
    app = Application(
        name="conf",
        client_type="confidential",
        authorization_grant_type="authorization-code",
        redirect_uris=REDIRECT_URI,
    )
    secret = app.client_secret
    app.save()
    code, verifier, _ = get_code(logged_in, app, scope="mcp profile")
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT_URI,
        "client_id": app.client_id,
        "code_verifier": verifier,
        "client_secret": secret,
    }
    subject = logged_in.post("/oauth/token", data).json()
    assert exchange(logged_in, app, subject["access_token"]).status_code == 401
    assert exchange_token(subject["access_token"], API_URI, "profile").scope == "profile"


@pytest.mark.django_db(transaction=True)  # the helper runs the exchange in a worker thread (its own connection)
def test_tool_context_helper(logged_in, public_app):
    subject = subject_pair(logged_in, public_app)
    request = RequestFactory().post("/mcp", HTTP_AUTHORIZATION=f"Bearer {subject['access_token']}")
    ctx = ToolContext(
        principal=SimpleNamespace(actor=None),
        session=None,
        request=request,
        request_id=1,
        protocol_version="2025-11-25",
    )
    token = asyncio.run(ctx.exchange_token(resource=API_URI, scope="profile"))
    assert token.scope == "profile"
    assert ctx.actor is None
    bare = ToolContext(
        principal=SimpleNamespace(actor=None),
        session=None,
        request=RequestFactory().post("/mcp"),
        request_id=1,
        protocol_version="2025-11-25",
    )
    with pytest.raises(TokenExchangeError) as raised:
        asyncio.run(bare.exchange_token(resource=API_URI))
    assert raised.value.error == "invalid_request"


def test_connected_apps_revoke_kills_exchanged_tokens(logged_in, public_app):
    subject = subject_pair(logged_in, public_app)
    token = exchange_token(subject["access_token"], API_URI, "profile")
    assert logged_in.get("/api/profile", HTTP_AUTHORIZATION=token.authorization).status_code == 200
    response = logged_in.post("/oauth/connected-apps/", {"action": "revoke", "client_id": public_app.client_id})
    assert response.status_code in (200, 302, 303)
    assert logged_in.get("/api/profile", HTTP_AUTHORIZATION=token.authorization).status_code == 401
    assert not get_access_token_model().objects.exists()
    revoked = AuditEvent.objects.get(kind=AuditEvent.Kind.GRANTS_REVOKED)
    assert revoked.detail["tokens"] == 3  # the subject's pair and the exchanged token
