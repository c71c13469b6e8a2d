"""What a refused token exchange says back: RFC 6749 §5.2 allows only %x20-21 / %x23-5B / %x5D-7E in
``error_description`` (no quote, no backslash, no control or non-ASCII character), and the text a
client sent is not echoed at any length."""

from __future__ import annotations

import re

import pytest

from mcp_oauth.models import AuditEvent
from tests.support.token_exchange_helpers import allowing_adapter, api_resource, exchange, subject_pair

pytestmark = pytest.mark.django_db

ALLOWED = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]*")


@pytest.fixture
def subject(client, user, resource, public_app, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": allowing_adapter()}
    api_resource()
    client.force_login(user)
    return subject_pair(client, public_app)


@pytest.mark.parametrize(
    "params, error",
    [
        ({"scope": "profile\u00a0admin"}, "invalid_scope"),  # a no-break space is no separator
        ({"scope": "profile\tadmin"}, "invalid_scope"),
        ({"scope": 'profile "admin"'}, "invalid_scope"),
        ({"scope": "profile \\admin"}, "invalid_scope"),
        ({"scope": "profile  mcp"}, "invalid_scope"),  # an empty scope token between two spaces
        ({"scope": " ".join(f"s{i}" for i in range(5000))}, "invalid_scope"),
        ({"resource": "http://testserver:é/api"}, "invalid_target"),
        ({"resource": 'http://testserver:"1"/api'}, "invalid_target"),
        ({"subject_token_type": "urn:x:\u202e"}, "invalid_request"),
    ],
    ids=["nbsp", "tab", "quotes", "backslash", "empty-token", "5000-scopes", "port-e-acute", "port-quoted", "bidi"],
)
def test_the_error_description_stays_in_the_rfc_6749_character_set(client, public_app, subject, params, error):
    response = exchange(client, public_app, subject["access_token"], **params)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] == error
    description = body["error_description"]
    assert ALLOWED.fullmatch(description), description
    assert 0 < len(description) <= 300
    audited = AuditEvent.objects.filter(kind=AuditEvent.Kind.TOKEN_EXCHANGE_REFUSED).latest("id")
    assert audited.detail == {"error": error, "description": description}
