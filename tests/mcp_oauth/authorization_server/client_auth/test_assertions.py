"""JWT assertions (mcp_oauth.authorization_server.client_auth.assertions, RFC 7523): a jti used once, even by concurrent requests; expired jti records pruned."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from mcp_oauth.authorization_server.client_auth.assertions import AssertionRefused, remember_jti, verify_assertion
from mcp_oauth.models import AuditEvent, UsedAssertion
from mcp_oauth.tasks import cleanup
from tests.mcp_oauth.authorization_server.client_auth.test_client_assertion import (  # noqa: F401 - fixtures
    ASSERTION_TYPE,
    ISSUER,
    assert_invalid_client,
    cc_request,
    client_claims,
    jwt_client,
    key,
)
from tests.support.https_server import cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures
from tests.support.jwt_keys import claims


@pytest.mark.django_db
def test_replayed_jti_is_refused(client, jwt_client, key):
    app, _ = jwt_client
    assertion = key.sign(client_claims(app))
    assert cc_request(client, assertion).status_code == 200
    get_access_token_model().objects.all().delete()
    replay = cc_request(client, assertion)
    assert_invalid_client(replay)
    assert "replay" in replay.json()["error_description"]
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.ASSERTION_REPLAYED, client_id=app.client_id).exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_use_of_one_jti_admits_exactly_one(key):
    token = key.sign(claims(iss="c", sub="c", aud=ISSUER))
    verified = verify_assertion(token, key.jwks["keys"], audiences=[ISSUER])
    outcomes: list[str] = []
    barrier = threading.Barrier(6)

    def use() -> None:
        barrier.wait()
        try:
            remember_jti(verified, "client_assertion")
            outcomes.append("ok")
        except AssertionRefused as refused:
            outcomes.append(refused.reason)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=use) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["ok"] + ["replay"] * 5
    assert UsedAssertion.objects.count() == 1


@pytest.mark.django_db
def test_cleanup_prunes_expired_jti_records(key):
    UsedAssertion.objects.create(key="a" * 64, kind="id_jag", issuer="x", expires_at=timezone.now() - timedelta(1))
    UsedAssertion.objects.create(key="b" * 64, kind="id_jag", issuer="x", expires_at=timezone.now() + timedelta(1))
    assert cleanup()["used_assertions"] == 1
    assert list(UsedAssertion.objects.values_list("key", flat=True)) == ["b" * 64]
