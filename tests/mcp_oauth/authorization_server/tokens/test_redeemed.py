"""Replays of a redeemed authorization code refused from the cache marker (mcp_oauth.authorization_server.tokens.redeemed).

The database path stays the authority: the first replay with the right verifier revokes what the
code issued and records it; the replays that would change nothing more are answered 400
``invalid_grant`` from the marker without a query.
"""

from __future__ import annotations

import hashlib

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_oauth.authorization_server.tokens.redeemed import MARKER_PREFIX
from mcp_oauth.signals import authorization_code_replayed
from tests.support.oauth_helpers import get_code, token_request

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def logged_in(client, user, resource, public_app):
    client.force_login(user)
    return client


def _mcp_status(client, token):
    return client.post(
        "/mcp",
        "{}",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_ACCEPT="application/json, text/event-stream",
    ).status_code


def _marker(code):
    return cache.get(MARKER_PREFIX + hashlib.sha256(code.encode()).hexdigest())


@pytest.fixture
def replays():
    seen = []
    authorization_code_replayed.connect(lambda **kw: seen.append(kw), weak=False, dispatch_uid="test-marker-replay")
    yield seen
    authorization_code_replayed.disconnect(dispatch_uid="test-marker-replay")


def test_a_redemption_leaves_a_marker_keyed_by_the_codes_hash(logged_in, public_app):
    code, verifier, _ = get_code(logged_in, public_app)
    assert token_request(logged_in, public_app, code, verifier).status_code == 200
    marker = _marker(code)
    assert marker["client_id"] == public_app.client_id and marker["revoked"] is False and marker["challenge"]
    assert cache.get(MARKER_PREFIX + code) is None


def test_the_first_verified_replay_revokes_then_replays_cost_no_query(logged_in, public_app, replays):
    code, verifier, _ = get_code(logged_in, public_app)
    first = token_request(logged_in, public_app, code, verifier).json()
    replay = token_request(logged_in, public_app, code, verifier)  # database path: revokes
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert _mcp_status(logged_in, first["access_token"]) == 401
    assert len(replays) == 1 and _marker(code)["revoked"] is True
    with CaptureQueriesContext(connection) as queries:
        again = token_request(logged_in, public_app, code, verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert again["Cache-Control"] == "no-store"
    assert [q["sql"] for q in queries.captured_queries if "oauth2_provider" in q["sql"]] == []
    assert len(replays) == 1  # revoked once, recorded once


def test_a_replay_with_a_wrong_verifier_is_refused_from_the_marker_and_revokes_nothing(logged_in, public_app, replays):
    code, verifier, _ = get_code(logged_in, public_app)
    first = token_request(logged_in, public_app, code, verifier).json()
    with CaptureQueriesContext(connection) as queries:
        replay = token_request(logged_in, public_app, code, "w" * 64)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert [q["sql"] for q in queries.captured_queries if "oauth2_provider" in q["sql"]] == []
    assert _mcp_status(logged_in, first["access_token"]) != 401
    assert replays == [] and _marker(code)["revoked"] is False
    # the right verifier still reaches the database path and revokes
    assert token_request(logged_in, public_app, code, verifier).status_code == 400
    assert _mcp_status(logged_in, first["access_token"]) == 401 and len(replays) == 1


def test_another_client_presenting_the_code_takes_the_database_path(logged_in, public_app, replays):
    from oauth2_provider.models import get_application_model

    other = get_application_model().objects.create(
        name="Other",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris=public_app.redirect_uris,
    )
    code, verifier, _ = get_code(logged_in, public_app)
    first = token_request(logged_in, public_app, code, verifier).json()
    with CaptureQueriesContext(connection) as queries:
        replay = token_request(logged_in, other, code, verifier)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert any("oauth2_provider" in q["sql"] for q in queries.captured_queries)
    assert _mcp_status(logged_in, first["access_token"]) != 401  # another client's replay revokes nothing


def test_no_free_redemption_slot_is_503_with_retry_after(logged_in, public_app, monkeypatch):
    import threading

    from mcp_oauth.authorization_server.tokens import redeemed

    monkeypatch.setattr(redeemed, "_slots", (threading.BoundedSemaphore(1), 0.05))
    redeemed._slots[0].acquire()  # every slot busy
    code, verifier, _ = get_code(logged_in, public_app)
    response = token_request(logged_in, public_app, code, verifier)
    assert response.status_code == 503 and response.json()["error"] == "temporarily_unavailable"
    assert response["Retry-After"] == "2"
    redeemed._slots[0].release()
    assert token_request(logged_in, public_app, code, verifier).status_code == 200  # the code was not consumed


def test_a_request_that_waited_for_a_slot_checks_the_marker_again(logged_in, public_app, monkeypatch):
    from mcp_oauth.authorization_server.tokens import redeemed

    code, verifier, _ = get_code(logged_in, public_app)
    assert token_request(logged_in, public_app, code, verifier).status_code == 200
    calls = []
    original = redeemed.known_replay

    def first_misses(form):  # the marker appears while the request waits for its slot
        calls.append(1)
        return False if len(calls) == 1 else original(form)

    monkeypatch.setattr("mcp_oauth.authorization_server.views.known_replay", first_misses)
    with CaptureQueriesContext(connection) as queries:
        replay = token_request(logged_in, public_app, code, "w" * 64)
    assert replay.status_code == 400 and len(calls) == 2
    assert [q["sql"] for q in queries.captured_queries if "oauth2_provider" in q["sql"]] == []


def test_a_request_waits_for_a_redemption_slot_holding_no_database_connection(monkeypatch):
    """The requests in the slots need connections from the same pool: one taken earlier in a waiting
    request (the client or the trust rules on a cold worker) is given back before it waits."""
    import threading

    from django.db import connections

    from mcp_oauth.authorization_server.tokens import redeemed
    from mcp_oauth.models import TrustRule

    monkeypatch.setattr(redeemed, "_slots", (threading.BoundedSemaphore(1), 30.0))
    redeemed._slots[0].acquire()  # every slot busy
    seen: dict = {}

    def waiting_request():
        try:
            list(TrustRule.objects.all())  # the request has used the database
            seen["connection"] = connections["default"]
            seen["before"] = seen["connection"].connection is not None
            with redeemed.redemption_slot():
                seen["in_slot"] = True
        finally:
            connections.close_all()

    thread = threading.Thread(target=waiting_request)
    thread.start()
    deadline = threading.Event()
    while "connection" not in seen and not deadline.wait(0.01):
        pass
    deadline.wait(0.3)  # the request is waiting for the slot now
    try:
        assert seen["before"] is True
        assert seen["connection"].connection is None  # given back while waiting
        assert "in_slot" not in seen
    finally:
        redeemed._slots[0].release()
        thread.join(timeout=30)
    assert seen["in_slot"] is True
