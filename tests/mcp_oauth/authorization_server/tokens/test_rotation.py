"""Refresh rotation: single winner, grace siblings, reuse after the window (mcp_oauth.authorization_server.tokens.rotation).

Sequential behaviour here (any database); the concurrent races run on PostgreSQL in
tests/mcp_oauth/authorization_server/test_rotation_concurrency.py.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connections
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_refresh_token_model

from mcp_oauth.models import AuditEvent, RefreshGeneration, RefreshTokenGeneration
from tests.support.oauth_helpers import bearer_works, first_pair
from tests.support.races import password_change, race_inside_grant

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client, user, resource, public_app):
    client.force_login(user)
    return client


def refresh(client, app, refresh_token, **extra):
    return client.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": app.client_id, **extra},
    )


def test_duplicate_refresh_in_window_gets_a_working_sibling_pair(logged_in, public_app):
    first = first_pair(logged_in, public_app)
    winner = refresh(logged_in, public_app, first["refresh_token"])
    duplicate = refresh(logged_in, public_app, first["refresh_token"])
    assert winner.status_code == 200 and duplicate.status_code == 200, duplicate.content
    a, b = winner.json(), duplicate.json()
    assert a["access_token"] != b["access_token"] and a["refresh_token"] != b["refresh_token"]
    assert a["scope"] == b["scope"] == "mcp"
    assert bearer_works(logged_in, a["access_token"]) and bearer_works(logged_in, b["access_token"])
    assert not bearer_works(logged_in, first["access_token"])
    # one new generation, two members (winner and its sibling); nothing revoked in the family
    assert RefreshGeneration.objects.count() == 2
    newest = RefreshGeneration.objects.get(parent__isnull=False)
    assert newest.members.count() == 2 and newest.members.filter(sibling=True).count() == 1
    assert get_refresh_token_model().objects.filter(revoked__isnull=True).count() == 2
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.REFRESH_TOKEN_REUSE).exists()
    grace = AuditEvent.objects.filter(kind=AuditEvent.Kind.TOKEN_REFRESHED, detail__grace_sibling=True)
    assert grace.count() == 1


def test_tokens_are_hashed_at_rest(logged_in, public_app):
    first = first_pair(logged_in, public_app)
    refresh(logged_in, public_app, first["refresh_token"])
    sibling = refresh(logged_in, public_app, first["refresh_token"]).json()
    for model in (get_access_token_model(), get_refresh_token_model()):
        values = set(model.objects.values_list("token", flat=True))
        assert sibling["access_token"] not in values and sibling["refresh_token"] not in values
        assert first["refresh_token"] not in values


def test_sibling_dies_with_its_generation(logged_in, public_app):
    first = first_pair(logged_in, public_app)
    a = refresh(logged_in, public_app, first["refresh_token"]).json()
    b = refresh(logged_in, public_app, first["refresh_token"]).json()
    # the winner's holder rotates generation 2 -> 3: the sibling's access token dies with generation 2
    c = refresh(logged_in, public_app, a["refresh_token"]).json()
    assert bearer_works(logged_in, c["access_token"])
    assert not bearer_works(logged_in, b["access_token"]) and not bearer_works(logged_in, a["access_token"])
    # the sibling's holder refreshes within the window of that rotation: a sibling in generation 3
    d = refresh(logged_in, public_app, b["refresh_token"])
    assert d.status_code == 200, d.content
    assert bearer_works(logged_in, d.json()["access_token"]) and bearer_works(logged_in, c["access_token"])
    assert RefreshGeneration.objects.count() == 3


def test_two_generations_back_is_a_reuse_even_in_the_window(logged_in, public_app):
    first = first_pair(logged_in, public_app)
    a = refresh(logged_in, public_app, first["refresh_token"]).json()
    b = refresh(logged_in, public_app, a["refresh_token"]).json()
    replay = refresh(logged_in, public_app, first["refresh_token"])
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert refresh(logged_in, public_app, b["refresh_token"]).status_code == 400
    assert not bearer_works(logged_in, b["access_token"])
    # the replay, then b (revoked with its family) presented again: two reuse events
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.REFRESH_TOKEN_REUSE, detail__family_revoked=True).count() == 2


def test_replay_after_the_window_revokes_the_family(logged_in, public_app):
    first = first_pair(logged_in, public_app)
    winner = refresh(logged_in, public_app, first["refresh_token"]).json()
    sibling = refresh(logged_in, public_app, first["refresh_token"]).json()
    # the window (60 s by default) has passed since the rotation
    RefreshGeneration.objects.filter(rotated_at__isnull=False).update(rotated_at=timezone.now() - timedelta(seconds=61))
    replay = refresh(logged_in, public_app, first["refresh_token"])
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert replay["Cache-Control"] == "no-store"
    assert get_refresh_token_model().objects.filter(revoked__isnull=True).count() == 0
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.REFRESH_TOKEN_REUSE)
    assert event.detail["family_revoked"] is True and event.detail["grace_seconds"] == 60
    for pair in (winner, sibling):
        assert not bearer_works(logged_in, pair["access_token"])
        assert refresh(logged_in, public_app, pair["refresh_token"]).status_code == 400


def test_a_token_revoked_on_purpose_gets_no_grace(logged_in, public_app):
    first = first_pair(logged_in, public_app)
    revoked = logged_in.post("/oauth/revoke", {"token": first["refresh_token"], "client_id": public_app.client_id})
    assert revoked.status_code == 200
    response = refresh(logged_in, public_app, first["refresh_token"])
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"


def test_grace_setting_is_bounded(settings):
    from mcp_oauth.authorization_server.tokens.rotation import grace_seconds

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REFRESH_TOKEN_GRACE_SECONDS": 86400}
    assert grace_seconds() == 300
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REFRESH_TOKEN_GRACE_SECONDS": -5}
    assert grace_seconds() == 0


def test_grace_siblings_are_capped_per_generation_without_revoking(logged_in, public_app, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REFRESH_TOKEN_GRACE_SIBLINGS": 3}
    first = first_pair(logged_in, public_app)
    responses = [refresh(logged_in, public_app, first["refresh_token"]) for _ in range(6)]
    assert [r.status_code for r in responses] == [200, 200, 200, 200, 400, 400]
    assert [r.json()["error"] for r in responses[4:]] == ["invalid_grant", "invalid_grant"]
    assert responses[4].json()["error_description"] == (
        "The refresh token was already used (too many concurrent refreshes)."
    )
    newest = RefreshGeneration.objects.get(parent__isnull=False)
    assert newest.members.filter(sibling=True).count() == 3
    # nothing was revoked: the winner and its 3 siblings all work and refresh on
    pairs = [r.json() for r in responses[:4]]
    assert all(bearer_works(logged_in, pair["access_token"]) for pair in pairs)
    assert get_refresh_token_model().objects.filter(revoked__isnull=True).count() == 4
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.REFRESH_TOKEN_REUSE).exists()
    assert refresh(logged_in, public_app, pairs[-1]["refresh_token"]).status_code == 200


def test_grace_siblings_default_and_bounds(settings):
    from django.core.checks import Error

    from mcp_oauth.authorization_server.tokens.rotation import grace_siblings
    from mcp_oauth.checks import check_rotation_and_scopes

    assert grace_siblings() == 10
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REFRESH_TOKEN_GRACE_SIBLINGS": 10**6}
    assert grace_siblings() == 1000
    assert [m.id for m in check_rotation_and_scopes(None) if isinstance(m, Error)] == ["mcp_oauth.E043"]
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REFRESH_TOKEN_GRACE_SIBLINGS": -1}
    assert grace_siblings() == 0


def test_every_refresh_token_has_a_generation(logged_in, public_app):
    first = first_pair(logged_in, public_app)
    refresh(logged_in, public_app, first["refresh_token"])
    assert RefreshTokenGeneration.objects.count() == get_refresh_token_model().objects.count() == 2


def test_a_rotation_between_reading_and_validating_is_not_taken_for_a_reuse(logged_in, public_app, monkeypatch):
    """The race behind a lost 2-way refresh on PostgreSQL: request B reads the live token, A's rotation
    commits, then B validates. B must go on (and get a sibling when saving), never revoke the family."""
    from oauthlib.common import Request

    from mcp_oauth.authorization_server.tokens import rotation
    from mcp_oauth.authorization_server.validator import MCPOAuth2Validator

    first = first_pair(logged_in, public_app)
    stale = rotation._presented_row(first["refresh_token"])  # B's read: still live
    winner = refresh(logged_in, public_app, first["refresh_token"]).json()  # A rotates
    monkeypatch.setattr(rotation, "_presented_row", lambda raw: stale)
    request = Request("http://testserver/oauth/token")
    assert MCPOAuth2Validator().validate_refresh_token(first["refresh_token"], public_app, request) is True
    assert request.refresh_token_instance.pk == stale.pk
    assert bearer_works(logged_in, winner["access_token"])
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.REFRESH_TOKEN_REUSE).exists()
    monkeypatch.undo()
    sibling = refresh(logged_in, public_app, first["refresh_token"])
    assert sibling.status_code == 200 and bearer_works(logged_in, sibling.json()["access_token"])


def test_generations_without_tokens_are_pruned(logged_in, public_app, settings):
    from mcp_oauth.tasks import prune_refresh_generations

    first = first_pair(logged_in, public_app)
    refresh(logged_in, public_app, first["refresh_token"])
    get_refresh_token_model().objects.filter(revoked__isnull=False).delete()  # what cleartokens does
    RefreshGeneration.objects.update(created_at=timezone.now() - timedelta(days=2))
    assert prune_refresh_generations.delay().get() == 1  # the beat task (eager here)
    assert RefreshGeneration.objects.count() == 1 and RefreshGeneration.objects.get().members.count() == 1
    assert "mcp_oauth.tasks.prune_refresh_generations" in {
        entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()
    }


@pytest.mark.django_db(transaction=True)
def test_a_revocation_waits_for_a_rotation_in_flight(logged_in, public_app, monkeypatch):
    """RFC 7009 revocation of the token being rotated answers 200 once the rotation commits (on
    SQLite too: it queues for the write lock instead of failing with "database is locked")."""
    first = first_pair(logged_in, public_app)

    def post(path, data):
        try:
            return Client().post(path, {**data, "client_id": public_app.client_id}).status_code
        finally:
            connections.close_all()

    rotation, revocation = race_inside_grant(
        monkeypatch,
        lambda: post("/oauth/token", {"grant_type": "refresh_token", "refresh_token": first["refresh_token"]}),
        lambda: post("/oauth/revoke", {"token": first["refresh_token"]}),
        settle_seconds=0.5,
    )
    assert (rotation, revocation) == (200, 200)


@pytest.mark.django_db(transaction=True)
def test_a_password_change_waits_for_a_rotation_in_flight(logged_in, user, public_app, monkeypatch):
    """Revoking the user's grants while their token is rotated succeeds once the rotation commits
    (on SQLite too: it queues for the write lock instead of failing with "database is locked"),
    and the pair the rotation issued is revoked with the rest."""
    first = first_pair(logged_in, public_app)

    def rotate():
        try:
            data = {"grant_type": "refresh_token", "refresh_token": first["refresh_token"]}
            return Client().post("/oauth/token", {**data, "client_id": public_app.client_id}).status_code
        finally:
            connections.close_all()

    rotation, _ = race_inside_grant(monkeypatch, rotate, password_change(user), settle_seconds=0.5)
    assert rotation == 200
    assert not get_refresh_token_model().objects.filter(revoked__isnull=True).exists()
    assert not get_access_token_model().objects.exists()
