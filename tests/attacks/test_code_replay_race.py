"""Two exchanges of one authorization code at the same moment, on PostgreSQL (SECURITY-CHECKLIST A8).

OAuth 2.1 §4.1.3 / RFC 9700 §4.2.4: a code used twice is refused and the tokens it produced are
revoked. Sequential replays are covered in tests/mcp_oauth/authorization_server/test_views.py; here the two requests are
released together by a barrier, so the loser may check the code while the winner's tokens are
not yet committed. Needs ``DATABASE_URL=postgres://…``; skipped on SQLite, whose database-wide
write lock serialises the two requests.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, connections
from django.test import Client
from oauth2_provider.models import get_access_token_model, get_refresh_token_model

from tests.support.oauth_helpers import REDIRECT_URI, bearer_status, get_code

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL (DATABASE_URL=postgres://…)"),
]


def _exchange_together(app, code: str, verifier: str, count: int = 2) -> list:
    barrier = threading.Barrier(count)

    def one(_):
        try:
            client = Client()
            barrier.wait(timeout=30)
            response = client.post(
                "/oauth/token",
                {
                    "grant_type": "authorization_code",
                    "code": code,
                    "code_verifier": verifier,
                    "redirect_uri": REDIRECT_URI,
                    "client_id": app.client_id,
                },
            )
            return response.status_code, response.json()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


@pytest.mark.parametrize("run", range(3))
def test_racing_code_replay_revokes_the_winners_tokens(client, user, resource, public_app, run):
    from mcp_oauth.signals import authorization_code_replayed

    replays = []
    authorization_code_replayed.connect(lambda **kw: replays.append(kw), weak=False, dispatch_uid="race-replay")
    try:
        client.force_login(user)
        code, verifier, _ = get_code(client, public_app)
        results = _exchange_together(public_app, code, verifier)
    finally:
        authorization_code_replayed.disconnect(dispatch_uid="race-replay")

    # One exchange wins, the other is the replay: invalid_grant. When the replay revokes the
    # winner's tokens before the winner's response is written, the winner is refused too
    # (its tokens are already dead); never two 200s.
    statuses = sorted(status for status, _ in results)
    assert statuses in ([200, 400], [400, 400]), results
    assert all(body["error"] == "invalid_grant" for status, body in results if status == 400), results
    assert len(replays) == 1
    # Whatever was issued is revoked, and the loser left no token behind.
    AccessToken, RefreshToken = get_access_token_model(), get_refresh_token_model()
    assert AccessToken.objects.count() == 0
    assert RefreshToken.objects.filter(revoked__isnull=True).count() == 0
    for status, body in results:
        if status == 200:
            assert bearer_status(client, body["access_token"]) == 401
            response = client.post(
                "/oauth/token",
                {
                    "grant_type": "refresh_token",
                    "refresh_token": body["refresh_token"],
                    "client_id": public_app.client_id,
                },
            )
            assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
