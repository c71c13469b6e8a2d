"""Attacks on the MCP endpoint's admission (mcp_oauth.mcp_server.transport.admission and
mcp_oauth.shared.rate_limit): a client cannot widen its bucket with more tokens or more users, and
the ids echoed in the 429 and 503 answers are JSON every client parses, whatever was sent."""

from __future__ import annotations

import json

import pytest

from mcp_oauth.mcp_server.transport.jsonrpc import MAX_INT_ID, MAX_STR_ID
from tests.mcp_oauth.mcp_server.transport.test_admission import bound, modern  # noqa: F401 - fixture
from tests.mcp_oauth.shared.test_rate_limit import lane, limited, modern_call, redis_cache  # noqa: F401 - fixtures
from tests.support.asgi_client import asgi_call

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, "mcp", resource.uri)


def test_many_tokens_and_users_of_one_client_share_its_bucket(
    lane, public_app, resource, mint_token, django_user_model, redis_cache, settings
):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "MCP_RATE_LIMIT": {"rate": 0.1, "burst": 2}}
    users = [django_user_model.objects.create_user(f"u{n}", password="pw-pw-pw-1") for n in range(4)]
    tokens = [mint_token(user, public_app, "mcp", resource.uri) for user in users]
    statuses = [asgi_call(lane, "POST", "/mcp", *modern_call(token, n))[0] for n, token in enumerate(tokens)]
    assert statuses == [200, 200, 429, 429]


HOSTILE_IDS = [
    "</script><script>alert(1)</script>",
    "line\u2028sep\u2029",
    'quote"back\\slash\nnewline',
    "😀",
    "x" * MAX_STR_ID,
    MAX_INT_ID,
    -MAX_INT_ID,
]


@pytest.mark.parametrize("request_id", HOSTILE_IDS)
def test_a_hostile_valid_id_is_echoed_exactly_in_the_429(lane, token, redis_cache, settings, request_id):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "MCP_RATE_LIMIT": {"rate": 0.1, "burst": 1}}
    assert asgi_call(lane, "POST", "/mcp", *modern_call(token, 0))[0] == 200
    status, headers, answer = asgi_call(lane, "POST", "/mcp", *modern_call(token, request_id))
    assert status == 429
    assert headers["content-type"] == "application/json"
    answer.decode("ascii")  # ASCII-escaped JSON: no raw U+2028 or markup-significant bytes survive
    assert headers["x-content-type-options"] == "nosniff"  # JSON, never sniffed as HTML
    assert json.loads(answer) == limited(request_id, 10)


@pytest.mark.parametrize(
    "raw_id",
    [
        b"1.5",
        b"NaN",
        b"Infinity",
        b"-Infinity",
        b"1e400",
        b"true",
        b"null",
        b'{"$ne": 1}',
        b"[1]",
        str(MAX_INT_ID + 1).encode(),
        b"9" * 5000,
        b'"\\ud800"',
        b'"\\u0000"',
        b'"' + b"x" * (MAX_STR_ID + 1) + b'"',
    ],
)
def test_an_invalid_id_is_null_in_the_503_and_the_body_stays_json(lane, token, bound, raw_id):
    bound(1, take=1)
    headers, _ = modern(token)
    body = b'{"jsonrpc": "2.0", "id": ' + raw_id + b', "method": "ping"}'
    status, response_headers, answer = asgi_call(lane, "POST", "/mcp", headers, body)
    assert status == 503
    assert response_headers["retry-after"] == "1"
    message = json.loads(answer, parse_constant=lambda name: pytest.fail(f"{name} in the answer"))
    assert message["id"] is None
    assert message["error"]["code"] == -32000


@pytest.mark.parametrize("request_id", HOSTILE_IDS)
def test_a_hostile_valid_id_is_echoed_exactly_in_the_503(lane, token, bound, request_id):
    bound(1, take=1)
    headers, body = modern(token, request_id=request_id)
    status, _, answer = asgi_call(lane, "POST", "/mcp", headers, body)
    assert status == 503
    answer.decode("ascii")
    assert json.loads(answer)["id"] == request_id
