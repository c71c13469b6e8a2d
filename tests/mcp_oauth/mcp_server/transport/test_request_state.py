"""Sealed requestState (mcp_oauth.mcp_server.transport.request_state), each attack refused: forged, tampered, replayed (also on a worker with its own cache), expired, another user's or client's, another tool's or arguments; key rotation and the keys check."""

from __future__ import annotations

import pytest
from oauth2_provider.models import get_application_model

from elicitation.models import Elicitation
from mcp_oauth.mcp_server.transport import request_state
from tests.mcp_oauth.mcp_server.transport.test_modern import (  # noqa: F401 - fixtures
    ACCEPT,
    CITY_FORM,
    FULL_CAPS,
    NAME_FORM,
    REGISTRY,
    V,
    _registry,
    ask,
    ask_twice,
    body,
    call_tool,
    envelope,
    error_of,
    first_round,
    headers,
    post,
    result_of,
    retry,
    token,
)


def assert_refused(response):
    assert response.status_code == 400, response.content
    error = error_of(response)
    assert error["code"] == -32602
    assert "requestState" in error["message"]


GOOD = {"input-1": {"action": "accept", "content": {"name": "Eve"}}}


@pytest.mark.parametrize("state", ["", "garbage", "v1.deadbeef.AAAA", "v2.x.y", 42, {"a": 1}, "v1." + "A" * 70000])
def test_forged_state_is_refused(client, token, state):
    assert_refused(retry(client, token, "ask", state, GOOD))


def test_tampered_state_is_refused(client, token):
    state = first_round(client, token)["requestState"]
    head, tail = state.rsplit(".", 1)
    flipped = tail[:10] + ("A" if tail[10] != "A" else "B") + tail[11:]
    assert_refused(retry(client, token, "ask", f"{head}.{flipped}", GOOD))


def test_replayed_state_is_refused(client, token):
    state = first_round(client, token)["requestState"]
    assert result_of(retry(client, token, "ask", state, GOOD))["resultType"] == "complete"
    assert_refused(retry(client, token, "ask", state, GOOD, id=3))


def test_expired_state_is_refused(client, token, monkeypatch):
    state = first_round(client, token)["requestState"]
    now = request_state.time.time()
    monkeypatch.setattr(request_state.time, "time", lambda: now + 601)
    assert_refused(retry(client, token, "ask", state, GOOD))


def test_state_of_another_user_or_client_is_refused(client, token, resource, other_user, user, mint_token):
    state = first_round(client, token)["requestState"]
    other = get_application_model().objects.create(
        name="Other",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/cb",
    )
    intruder = mint_token(other_user, get_application_model().objects.get(name="Test client"), resource=resource.uri)
    other_client = mint_token(user, other, resource=resource.uri)
    assert_refused(retry(client, intruder, "ask", state, GOOD))
    assert_refused(retry(client, other_client, "ask", state, GOOD))


def test_state_for_other_tool_or_arguments_is_refused(client, token):
    state = first_round(client, token, arguments={"greeting": "Hi"})["requestState"]
    assert_refused(retry(client, token, "ask", state, GOOD, arguments={"greeting": "Yo"}))
    state = first_round(client, token, arguments={"greeting": "Hi"})["requestState"]
    assert_refused(retry(client, token, "ask_twice", state, GOOD))


def test_key_rotation(client, token, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REQUEST_STATE_KEYS": ["old-key-" + "x" * 32]}
    state = first_round(client, token)["requestState"]
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REQUEST_STATE_KEYS": ["new-key-" + "y" * 32, "old-key-" + "x" * 32]}
    assert result_of(retry(client, token, "ask", state, GOOD))["resultType"] == "complete"
    state = first_round(client, token)["requestState"]
    assert state.split(".")[1] == request_state.state_keys()[0][0]
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REQUEST_STATE_KEYS": ["new-key-" + "z" * 32]}
    assert_refused(retry(client, token, "ask", state, GOOD, id=3))


def test_secret_key_rotated_host_by_host_keeps_derived_states(client, token, settings):
    """Without REQUEST_STATE_KEYS: a state sealed by a host that promoted the new SECRET_KEY opens on
    a host that still signs with the old one and holds the new one in SECRET_KEY_FALLBACKS, and the
    other way round; a host without the key refuses it."""
    old, new = "old-secret-" + "o" * 40, "new-secret-" + "n" * 40
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REQUEST_STATE_KEYS": None}
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = new, [old]  # promoted host
    state = first_round(client, token)["requestState"]
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = old, [new]  # host at step 1
    assert result_of(retry(client, token, "ask", state, GOOD))["resultType"] == "complete"
    state = first_round(client, token)["requestState"]
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = new, [old]
    assert result_of(retry(client, token, "ask", state, GOOD, id=3))["resultType"] == "complete"
    state = first_round(client, token)["requestState"]
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = old, []  # a host that never got the new key
    assert_refused(retry(client, token, "ask", state, GOOD, id=4))


def test_replay_on_a_worker_with_its_own_cache_is_refused(client, token):
    """The cache that records used states may be per process; the form row a state names leaves
    "pending" once in the database, so another worker refuses the replay as well."""
    from django.core.cache import caches

    state = first_round(client, token)["requestState"]
    assert result_of(retry(client, token, "ask", state, GOOD))["resultType"] == "complete"
    for cache in caches.all():
        cache.clear()
    assert_refused(retry(client, token, "ask", state, GOOD, id=3))
    assert Elicitation.objects.get().content == {"name": "Eve"}


@pytest.mark.parametrize(
    ("keys", "expected"),
    [(None, {"mcp_oauth.W060"}), (["short"], {"mcp_oauth.E060"}), ("x" * 40, {"mcp_oauth.E060"}), (["k" * 32], set())],
)
def test_request_state_keys_check(settings, keys, expected):
    from django.core.checks import run_checks

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REQUEST_STATE_KEYS": keys}
    found = {m.id for m in run_checks(include_deployment_checks=True) if m.id in ("mcp_oauth.W060", "mcp_oauth.E060")}
    assert found == expected
    # W060 is for production only (one development process may use the SECRET_KEY-derived key).
    assert {m.id for m in run_checks() if m.id in ("mcp_oauth.W060", "mcp_oauth.E060")} == expected - {"mcp_oauth.W060"}
