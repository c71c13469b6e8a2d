"""``mcp_oauth.authorization_server.token_exchange.actor``: the exchanged token's lifetime capped by its
subject token's (RFC 8693 §2.2.1), its ``TokenActor`` row (``act`` nested along a chain, §4.1), the
tokens exchanged for a revoked one revoked with it (RFC 7009), the whole chain followed, expired
rows pruned."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from mcp_oauth.authorization_server.token_exchange.actor import prune_token_actors, revoke_exchanged
from mcp_oauth.models import AuditEvent, TokenActor
from mcp_oauth.resource_server.cache import token_checksum
from tests.support.token_exchange_helpers import (
    MCP_URI,
    api_profile,
    exchange,
    subject_pair,
)


def test_lifetime_is_capped_by_the_subject_token(logged_in, public_app):
    subject = subject_pair(logged_in, public_app)
    subject_row = get_access_token_model().objects.get(token_checksum=token_checksum(subject["access_token"]))
    subject_row.expires = timezone.now() + timedelta(seconds=90)
    subject_row.save()
    body = exchange(logged_in, public_app, subject["access_token"]).json()
    assert 0 < body["expires_in"] <= 90
    row = get_access_token_model().objects.get(token_checksum=token_checksum(body["access_token"]))
    assert row.expires <= subject_row.expires
    assert TokenActor.objects.get(token_checksum=row.token_checksum).expires <= subject_row.expires


def test_a_chain_of_exchanges_nests_act(logged_in, public_app, allow_all, resource):
    subject = subject_pair(logged_in, public_app)
    first = exchange(logged_in, public_app, subject["access_token"]).json()
    # exchanging the API token back for the MCP resource: a delegation again, act nested (RFC 8693 §4.1)
    second = exchange(logged_in, public_app, first["access_token"], resource=MCP_URI, scope="profile")
    assert second.status_code == 200, second.content
    row = TokenActor.objects.get(token_checksum=token_checksum(second.json()["access_token"]))
    assert row.act == {"sub": public_app.client_id, "act": {"sub": public_app.client_id}}


def test_revoking_the_subject_token_revokes_what_was_exchanged_for_it(logged_in, public_app, allow_all):
    subject = subject_pair(logged_in, public_app)
    first = exchange(logged_in, public_app, subject["access_token"]).json()
    second = exchange(logged_in, public_app, first["access_token"], resource=MCP_URI, scope="profile").json()
    down = exchange(logged_in, public_app, subject["access_token"], resource=None, scope="mcp").json()
    unrelated = subject_pair(logged_in, public_app)
    response = logged_in.post("/oauth/revoke", {"token": subject["access_token"], "client_id": public_app.client_id})
    assert response.status_code == 200
    alive = set(get_access_token_model().objects.values_list("token_checksum", flat=True))
    for gone in (subject, first, second, down):
        assert token_checksum(gone["access_token"]) not in alive
    assert token_checksum(unrelated["access_token"]) in alive
    assert api_profile(logged_in, first["access_token"]).status_code == 401
    event = AuditEvent.objects.filter(kind=AuditEvent.Kind.TOKEN_REVOKED).latest("id")
    assert event.detail["exchanged_tokens"] == 3


def test_revoking_the_subject_refresh_token_revokes_what_was_exchanged(logged_in, public_app):
    subject = subject_pair(logged_in, public_app)
    exchanged = exchange(logged_in, public_app, subject["access_token"]).json()
    response = logged_in.post(
        "/oauth/revoke",
        {"token": subject["refresh_token"], "client_id": public_app.client_id, "token_type_hint": "refresh_token"},
    )
    assert response.status_code == 200
    assert api_profile(logged_in, exchanged["access_token"]).status_code == 401
    assert (
        not get_access_token_model().objects.filter(token_checksum=token_checksum(exchanged["access_token"])).exists()
    )


def test_revoking_an_exchanged_token_leaves_its_subject(logged_in, public_app):
    subject = subject_pair(logged_in, public_app)
    exchanged = exchange(logged_in, public_app, subject["access_token"]).json()
    logged_in.post("/oauth/revoke", {"token": exchanged["access_token"], "client_id": public_app.client_id})
    assert api_profile(logged_in, exchanged["access_token"]).status_code == 401
    assert get_access_token_model().objects.filter(token_checksum=token_checksum(subject["access_token"])).exists()


def _token(user, app, checksum_seed: str, minutes: int = 60):
    AccessToken = get_access_token_model()
    return AccessToken.objects.create(
        user=user,
        application=app,
        token=checksum_seed,
        expires=timezone.now() + timedelta(minutes=minutes),
        scope="mcp",
    )


def _exchanged(user, app, value: str, subject) -> None:
    row = _token(user, app, value)
    TokenActor.objects.create(
        token_checksum=row.token_checksum, act={"sub": app.client_id}, subject_token_checksum=subject
    )


def test_revoke_exchanged_follows_the_whole_chain(user, public_app):
    root = _token(user, public_app, "root-token")
    parent = root.token_checksum
    for generation in range(13):
        value = f"generation-{generation}"
        _exchanged(user, public_app, value, parent)
        parent = token_checksum(value)
    unrelated = _token(user, public_app, "unrelated")
    assert revoke_exchanged([root.token_checksum]) == 13
    alive = set(get_access_token_model().objects.values_list("token", flat=True))
    assert alive == {"root-token", unrelated.token}


def test_revoke_exchanged_revokes_each_token_once_and_ignores_empty_checksums(user, public_app):
    subject = _token(user, public_app, "subject")
    _exchanged(user, public_app, "one", subject.token_checksum)
    _exchanged(user, public_app, "two", subject.token_checksum)
    # a row naming the subject as exchanged for its own child: no loop
    TokenActor.objects.create(
        token_checksum=subject.token_checksum, act=None, subject_token_checksum=token_checksum("one")
    )
    assert revoke_exchanged(["", subject.token_checksum]) == 2
    assert list(get_access_token_model().objects.values_list("token", flat=True)) == ["subject"]
    assert revoke_exchanged([""]) == 0 and revoke_exchanged([]) == 0


def test_prune_deletes_the_rows_of_expired_tokens_only(db):
    now = timezone.now()
    TokenActor.objects.create(token_checksum="a" * 64, act=None, expires=now - timedelta(seconds=1))
    TokenActor.objects.create(token_checksum="b" * 64, act={"sub": "c"}, expires=now + timedelta(seconds=1))
    TokenActor.objects.create(token_checksum="c" * 64, act=None, expires=None)
    assert prune_token_actors(now) == 1
    assert sorted(TokenActor.objects.values_list("token_checksum", flat=True)) == ["b" * 64, "c" * 64]
    assert prune_token_actors(now + timedelta(seconds=2)) == 1
