"""One-row writes and reads without the ORM's compiler (mcp_oauth.shared.db), and the refresh rotation built on them.

* :func:`mcp_oauth.shared.db.insert` stores exactly what ``Model.objects.create()`` stores (compared
  column by column, as the database returns them: datetimes, UUIDs, JSON, booleans) and sends
  ``pre_save`` / ``post_save`` as ``save()`` does, only when they have receivers;
* :func:`mcp_oauth.shared.db.from_row` reads a hand-selected row as the ORM reads it;
* the rotation's hand-written statements: the access tokens it deletes leave the token cache
  (a warm cache refuses them at once), ``post_delete`` goes to their receivers, and a grant
  takes the number of statements it is meant to.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.db import connection
from django.db.models.signals import post_delete, post_save, pre_delete, pre_save
from django.test.utils import CaptureQueriesContext
from oauth2_provider.models import get_access_token_model, get_refresh_token_model, set_token_value

from mcp_oauth.models import AuditEvent, RedeemedAuthorizationCode, RefreshGeneration, RefreshTokenGeneration
from mcp_oauth.resource_server.cache import TOKEN_PREFIX, TOMBSTONE, token_checksum
from mcp_oauth.resource_server.revocation import is_local
from mcp_oauth.shared import db
from tests.support.oauth_helpers import bearer_works, first_pair

pytestmark = pytest.mark.django_db

FIXED = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)


def raw_row(model, pk) -> dict:
    """The stored row of ``model`` with primary key ``pk``, as the database driver returns it."""
    meta = model._meta
    qn = connection.ops.quote_name
    names = [field.column for field in meta.concrete_fields]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {', '.join(qn(name) for name in names)} FROM {qn(meta.db_table)} WHERE {qn(meta.pk.column)} = %s",
            [meta.pk.get_db_prep_value(pk, connection)],
        )
        return dict(zip(names, cursor.fetchone(), strict=True))


def same_rows(model, orm_pk, cheap_pk, differ=()) -> None:
    orm, cheap = raw_row(model, orm_pk), raw_row(model, cheap_pk)
    for name in {model._meta.pk.column, *differ}:
        orm.pop(name), cheap.pop(name)
    assert orm == cheap


def access_token(user, app, raw, **extra):
    token = get_access_token_model()(
        user=user,
        application=app,
        scope="mcp tools",
        expires=FIXED + timedelta(hours=1),
        resource=["http://testserver/mcp"],
        **extra,
    )
    set_token_value(token, raw)
    return token


@pytest.fixture
def frozen():
    with mock.patch("django.utils.timezone.now", return_value=FIXED):
        yield FIXED


# --- insert ------------------------------------------------------------------------------


def test_an_access_token_is_stored_as_the_orm_stores_it(user, public_app, frozen):
    orm = access_token(user, public_app, "raw-orm")
    orm.save()
    cheap = db.insert(access_token(user, public_app, "raw-cheap"))
    assert isinstance(cheap.pk, int) and cheap.pk != orm.pk
    assert not cheap._state.adding and cheap._state.db == "default"
    assert cheap.token_checksum == token_checksum("raw-cheap")  # the field's pre_save ran
    same_rows(get_access_token_model(), orm.pk, cheap.pk, differ=("token_checksum",))
    stored = get_access_token_model().objects.get(pk=cheap.pk)
    assert stored.created == stored.updated == FIXED and stored.resource == ["http://testserver/mcp"]


def test_refresh_tokens_generations_and_links_are_stored_as_the_orm_stores_them(user, public_app, frozen):
    RefreshToken = get_refresh_token_model()
    at = db.insert(access_token(user, public_app, "raw-at"))
    family = uuid.uuid4()
    orm = RefreshToken(user=user, application=public_app, token_family=family, resource=["http://testserver/mcp"])
    set_token_value(orm, "rt-orm")
    orm.save()
    cheap = RefreshToken(
        user=user, application=public_app, access_token=at, token_family=family, resource=["http://testserver/mcp"]
    )
    set_token_value(cheap, "rt-cheap")
    db.insert(cheap)
    same_rows(RefreshToken, orm.pk, cheap.pk, differ=("token_checksum", "access_token_id"))
    assert RefreshToken.objects.get(pk=cheap.pk).access_token_id == at.pk

    parent = RefreshGeneration.objects.create(token_family=family, scope="mcp")
    orm_generation = RefreshGeneration.objects.create(
        token_family=family,
        parent=parent,
        scope="mcp tools",
        created_at=FIXED,
        rotated_at=FIXED,
        session_started_at=FIXED,
    )
    other_parent = db.insert(RefreshGeneration(token_family=family, scope="mcp"))
    cheap_generation = db.insert(
        RefreshGeneration(
            token_family=family,
            parent=other_parent,
            scope="mcp tools",
            created_at=FIXED,
            rotated_at=FIXED,
            session_started_at=FIXED,
        )
    )
    assert isinstance(cheap_generation.pk, uuid.UUID)
    same_rows(RefreshGeneration, orm_generation.pk, cheap_generation.pk, differ=("parent_id",))
    assert RefreshGeneration.objects.get(pk=cheap_generation.pk).parent_id == other_parent.pk

    RefreshTokenGeneration.objects.create(refresh_token=orm, generation=orm_generation, sibling=True)
    db.insert(RefreshTokenGeneration(refresh_token=cheap, generation=cheap_generation, sibling=True))
    same_rows(RefreshTokenGeneration, orm.pk, cheap.pk, differ=("generation_id",))
    assert RefreshTokenGeneration.objects.get(pk=cheap.pk).generation_id == cheap_generation.pk


def test_an_audit_event_is_stored_as_the_orm_stores_it(user, frozen):
    detail = {"nested": {"list": [1, 2.5, None, True], "text": "é ✓"}, "empty": {}}
    fields = {"user": user, "client_id": "c", "ip_address": "2001:db8::1", "detail": detail, "created_at": FIXED}
    orm = AuditEvent.objects.create(kind=AuditEvent.Kind.TOKEN_ISSUED, **fields)
    cheap = db.insert(AuditEvent(kind=AuditEvent.Kind.TOKEN_ISSUED, **fields))
    same_rows(AuditEvent, orm.pk, cheap.pk)
    assert AuditEvent.objects.get(pk=cheap.pk).detail == detail


def test_signals_are_sent_as_save_sends_them_only_when_listened(user, public_app):
    sent = []

    def on_pre(sender, **kwargs):
        assert kwargs["instance"].pk is None  # before the row exists
        sent.append((pre_save, {"sender": sender, **kwargs}))

    def on_post(sender, **kwargs):
        assert kwargs["instance"].pk is not None and not kwargs["instance"]._state.adding
        sent.append((post_save, {"sender": sender, **kwargs}))

    pre_save.connect(on_pre, sender=AuditEvent, weak=False)
    post_save.connect(on_post, sender=AuditEvent, weak=False)
    try:
        event = db.insert(AuditEvent(kind=AuditEvent.Kind.TOKEN_ISSUED, client_id="c"))
        orm = AuditEvent.objects.create(kind=AuditEvent.Kind.TOKEN_ISSUED, client_id="c")
    finally:
        pre_save.disconnect(on_pre, sender=AuditEvent)
        post_save.disconnect(on_post, sender=AuditEvent)
    cheap_sent, orm_sent = sent[:2], sent[2:]
    assert [signal for signal, _ in cheap_sent] == [pre_save, post_save]
    for (_, cheap_kwargs), (_, orm_kwargs) in zip(cheap_sent, orm_sent, strict=True):
        assert cheap_kwargs["instance"] is event and orm_kwargs["instance"] is orm
        assert {k: v for k, v in cheap_kwargs.items() if k not in ("instance", "signal")} == {
            k: v for k, v in orm_kwargs.items() if k not in ("instance", "signal")
        }
    assert cheap_sent[1][1]["created"] is True
    # Without receivers nothing is sent: a receiver for another model sees nothing.
    assert not pre_save.has_listeners(RefreshGeneration) and not post_save.has_listeners(RefreshGeneration)
    with mock.patch.object(post_save, "send", side_effect=AssertionError("sent")) as send:
        db.insert(RefreshGeneration(scope="mcp"))
    send.assert_not_called()


def test_an_unsaved_related_object_is_refused_as_save_refuses_it(user, public_app):
    from django.contrib.auth import get_user_model

    unsaved = get_user_model()(username="ghost")
    with pytest.raises(ValueError, match="unsaved related object 'user'"):
        db.insert(AuditEvent(kind=AuditEvent.Kind.TOKEN_ISSUED, user=unsaved))


def test_from_row_reads_as_the_orm_reads(user, public_app):
    AccessToken = get_access_token_model()
    stored = db.insert(access_token(user, public_app, "raw-read"))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {db.columns(AccessToken, 'default', 't')} FROM {db.table(AccessToken, 'default')} t "
            f"WHERE t.{db.column(AccessToken, 'id', 'default')} = %s",
            [stored.pk],
        )
        row = cursor.fetchone()
    read = db.from_row(AccessToken, row, 0, "default")
    orm = AccessToken.objects.get(pk=stored.pk)
    for field in AccessToken._meta.concrete_fields:
        assert getattr(read, field.attname) == getattr(orm, field.attname), field.name
    assert not read._state.adding and read._state.db == "default"
    assert db.from_row(AccessToken, [None] * len(row), 0, "default") is None


# --- the rotation ------------------------------------------------------------------------


@pytest.fixture
def logged_in(client, user, resource, public_app):
    client.force_login(user)
    return client


def refresh(client, app, refresh_token):
    return client.post(
        "/oauth/token", {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": app.client_id}
    )


@pytest.mark.django_db(transaction=True)
def test_a_rotated_away_access_token_is_refused_at_once_on_a_warm_cache(logged_in, public_app):
    from django.core.cache import caches

    from mcp_oauth.settings import mcp_oauth_settings

    token_cache = caches[mcp_oauth_settings.TOKEN_CACHE]
    first = first_pair(logged_in, public_app)
    assert bearer_works(logged_in, first["access_token"]) and bearer_works(logged_in, first["access_token"])
    key = TOKEN_PREFIX + token_checksum(first["access_token"])
    assert token_cache.get(key) not in (None, TOMBSTONE)  # warm: served from the cache
    second = refresh(logged_in, public_app, first["refresh_token"]).json()
    assert token_cache.get(key) == TOMBSTONE
    assert not bearer_works(logged_in, first["access_token"])
    assert bearer_works(logged_in, second["access_token"]) and bearer_works(logged_in, second["access_token"])
    # and again one generation later (a token issued by a refresh, not by the code exchange)
    key = TOKEN_PREFIX + token_checksum(second["access_token"])
    refresh(logged_in, public_app, second["refresh_token"])
    assert token_cache.get(key) == TOMBSTONE and not bearer_works(logged_in, second["access_token"])


def test_post_delete_reaches_receivers_of_the_rotated_away_access_token(logged_in, public_app):
    AccessToken = get_access_token_model()
    first = first_pair(logged_in, public_app)
    deleted = []

    def on_delete(sender, instance, using, origin, **kwargs):
        deleted.append((instance.token_checksum, instance.pk, using))
        assert origin.token_checksum == token_checksum(first["refresh_token"])  # the rotated refresh token

    post_delete.connect(on_delete, sender=AccessToken, weak=False)
    try:
        assert refresh(logged_in, public_app, first["refresh_token"]).status_code == 200
    finally:
        post_delete.disconnect(on_delete, sender=AccessToken)
    assert [checksum for checksum, _, _ in deleted] == [token_checksum(first["access_token"])]
    assert deleted[0][1] is not None and deleted[0][2] == "default"
    assert not AccessToken.objects.filter(token_checksum=token_checksum(first["access_token"])).exists()


def test_a_pre_delete_receiver_gets_the_orm_deletion(logged_in, public_app):
    """With a ``pre_delete`` receiver the access tokens are deleted by Django's collector (it
    sends the signal before the row goes); the outcome is the same."""
    AccessToken = get_access_token_model()
    first = first_pair(logged_in, public_app)
    seen = []

    def on_pre_delete(sender, instance, **kwargs):
        seen.append(AccessToken.objects.filter(pk=instance.pk).exists())

    pre_delete.connect(on_pre_delete, sender=AccessToken, weak=False)
    try:
        second = refresh(logged_in, public_app, first["refresh_token"])
    finally:
        pre_delete.disconnect(on_pre_delete, sender=AccessToken)
    assert second.status_code == 200 and seen == [True]
    assert not bearer_works(logged_in, first["access_token"]) and bearer_works(logged_in, second.json()["access_token"])
    assert get_refresh_token_model().objects.filter(revoked__isnull=True).count() == 1


def test_the_redemption_record_lets_go_of_the_code_exchange_access_token(logged_in, public_app):
    first = first_pair(logged_in, public_app)
    redeemed = RedeemedAuthorizationCode.objects.get()
    assert redeemed.access_token_id is not None
    assert refresh(logged_in, public_app, first["refresh_token"]).status_code == 200
    redeemed.refresh_from_db()
    assert redeemed.access_token_id is None and redeemed.token_family is not None
    old = get_refresh_token_model().objects.get(token_checksum=token_checksum(first["refresh_token"]))
    assert old.revoked is not None and old.access_token_id is None


def test_statements_per_grant(logged_in, public_app, service):
    first = first_pair(logged_in, public_app)
    second = refresh(logged_in, public_app, first["refresh_token"]).json()  # a token issued by a refresh
    with CaptureQueriesContext(connection) as queries:
        assert refresh(logged_in, public_app, second["refresh_token"]).status_code == 200
    # A token cache of this process's own (the test settings' LocMem): the deleted access token
    # also bumps the revocation stamp (one UPDATE; mcp_oauth.resource_server.revocation)
    stamp = [q for q in queries.captured_queries if "revocationstamp" in q["sql"]]
    assert [q["sql"].split()[0] for q in stamp] == (["UPDATE"] if is_local() else [])
    statements = [
        q["sql"].split()[0]
        for q in queries.captured_queries
        if not q["sql"].startswith(("SAVEPOINT", "RELEASE")) and q not in stamp
    ]
    if connection.vendor == "postgresql":
        # presented row; its DPoP binding (RFC 9449 §5: a bound refresh token needs the same key); the
        # organization it acts for (TokenOrganization, inherited by the new pair); claim; the rest of
        # the rotation and the audit event in one statement (rotation_statement)
        assert statements == ["SELECT", "SELECT", "SELECT", "UPDATE", "WITH"]
    else:
        # presented row; its DPoP binding; its organization; claim; access tokens deleted; members
        # revoked; 4 rows of the new pair; audit
        assert statements.count("SELECT") == 3
        assert statements.count("INSERT") == 5 and statements.count("DELETE") == 1 and statements.count("UPDATE") <= 3
    app, secret = service
    with CaptureQueriesContext(connection) as queries:
        response = logged_in.post(
            "/oauth/token", {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION=basic(app.client_id, secret)
        )
    assert response.status_code == 200, response.content
    inserts = [q["sql"].split()[2].strip('"`') for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    tables = (get_access_token_model()._meta.db_table, AuditEvent._meta.db_table)
    assert sorted(table for table in inserts if table in tables) == sorted(tables)  # one row each


def basic(client_id: str, secret: str) -> str:
    import base64

    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


def test_a_token_from_before_generations_is_rotated_on_the_orm_path(logged_in, public_app):
    first = first_pair(logged_in, public_app)
    RefreshToken = get_refresh_token_model()
    old = RefreshToken.objects.get(token_checksum=token_checksum(first["refresh_token"]))
    RefreshTokenGeneration.objects.filter(refresh_token=old).delete()  # as issued before generations existed
    RefreshGeneration.objects.all().delete()
    second = refresh(logged_in, public_app, first["refresh_token"])
    assert second.status_code == 200, second.content
    old.refresh_from_db()
    assert old.revoked is not None and RefreshTokenGeneration.objects.get(refresh_token=old).generation.rotated_at
    assert not bearer_works(logged_in, first["access_token"]) and bearer_works(logged_in, second.json()["access_token"])


def test_a_token_revoked_between_validation_and_saving_changes_nothing(logged_in, public_app, monkeypatch):
    from mcp_oauth.authorization_server.tokens import rotation

    first = first_pair(logged_in, public_app)
    RefreshToken = get_refresh_token_model()
    stale = rotation._presented_row(first["refresh_token"])
    monkeypatch.setattr(rotation, "_presented_row", lambda raw: stale)
    RefreshToken.objects.filter(pk=stale.pk).update(revoked=FIXED)  # RFC 7009, admin… after the read
    response = refresh(logged_in, public_app, first["refresh_token"])
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    generation = RefreshGeneration.objects.get()
    assert generation.rotated_at is None  # the claim rolled back with the rest
    assert get_access_token_model().objects.filter(token_checksum=token_checksum(first["access_token"])).exists()
    assert RefreshToken.objects.count() == 1


# --- the rotation in one statement (PostgreSQL) ------------------------------------------

needs_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the one-statement rotation is PostgreSQL's (DATABASE_URL=postgres://…)"
)


def new_rows(response) -> tuple:
    """The access token, refresh token, generation and membership a refresh response issued."""
    AccessToken, RefreshToken = get_access_token_model(), get_refresh_token_model()
    body = response.json()
    access = AccessToken.objects.get(token_checksum=token_checksum(body["access_token"]))
    refresh_row = RefreshToken.objects.get(token_checksum=token_checksum(body["refresh_token"]))
    member = RefreshTokenGeneration.objects.get(refresh_token=refresh_row)
    return access, refresh_row, member.generation, member


@needs_postgresql
def test_the_one_statement_rotation_writes_what_the_seven_statements_write(logged_in, public_app, frozen, monkeypatch):
    from mcp_oauth.authorization_server.tokens import rotation_statement

    RefreshToken = get_refresh_token_model()
    by_seven, by_one = first_pair(logged_in, public_app), first_pair(logged_in, public_app)
    with monkeypatch.context() as patched:
        patched.setattr(rotation_statement, "applies", lambda *args: False)
        with CaptureQueriesContext(connection) as seven_queries:
            seven = refresh(logged_in, public_app, by_seven["refresh_token"])
    with CaptureQueriesContext(connection) as one_queries:
        one = refresh(logged_in, public_app, by_one["refresh_token"])
    assert seven.status_code == one.status_code == 200, (seven.content, one.content)
    assert not any(q["sql"].startswith("WITH") for q in seven_queries.captured_queries)
    assert sum(q["sql"].startswith("WITH") for q in one_queries.captured_queries) == 1
    assert {key: value for key, value in seven.json().items() if not key.endswith("_token")} == {
        key: value for key, value in one.json().items() if not key.endswith("_token")
    }

    (s_access, s_refresh, s_generation, s_member), (o_access, o_refresh, o_generation, o_member) = (
        new_rows(seven),
        new_rows(one),
    )
    same_rows(get_access_token_model(), s_access.pk, o_access.pk, differ=("token_checksum", "source_refresh_token_id"))
    same_rows(RefreshToken, s_refresh.pk, o_refresh.pk, differ=("token_checksum", "access_token_id", "token_family"))
    # created_at: a default the frozen clock does not reach (default=timezone.now); session_started_at:
    # each family's own, carried from the generation rotated away (the two pairs started apart)
    same_rows(
        RefreshGeneration,
        s_generation.pk,
        o_generation.pk,
        differ=("token_family", "parent_id", "created_at", "session_started_at"),
    )
    assert s_generation.session_started_at == s_generation.parent.session_started_at
    assert o_generation.session_started_at == o_generation.parent.session_started_at
    same_rows(RefreshTokenGeneration, s_member.pk, o_member.pk, differ=("generation_id",))
    assert (o_refresh.access_token_id, o_member.pk, o_access.source_refresh_token_id) == (
        o_access.pk,
        o_refresh.pk,
        RefreshToken.objects.get(token_checksum=token_checksum(by_one["refresh_token"])).pk,
    )
    # the rotated-away rows
    s_old = RefreshToken.objects.get(token_checksum=token_checksum(by_seven["refresh_token"]))
    o_old = RefreshToken.objects.get(token_checksum=token_checksum(by_one["refresh_token"]))
    same_rows(RefreshToken, s_old.pk, o_old.pk, differ=("token_checksum", "token_family"))
    assert o_old.revoked == FIXED and o_old.access_token_id is None
    assert o_generation.parent.rotated_at == s_generation.parent.rotated_at == FIXED
    assert not get_access_token_model().objects.filter(token_checksum=token_checksum(by_one["access_token"])).exists()
    # the grant's audit event, written by the same statement
    s_event, o_event = AuditEvent.objects.filter(kind=AuditEvent.Kind.TOKEN_REFRESHED).order_by("pk")
    same_rows(AuditEvent, s_event.pk, o_event.pk, differ=("created_at",))  # default=timezone.now too


@needs_postgresql
def test_the_one_statement_rotation_sends_the_signals_save_and_delete_send(logged_in, public_app):
    from mcp_oauth.audit import audit_event

    AccessToken, RefreshToken = get_access_token_model(), get_refresh_token_model()
    first = first_pair(logged_in, public_app)
    models = (AccessToken, RefreshToken, RefreshGeneration, RefreshTokenGeneration, AuditEvent)
    seen: list[tuple] = []

    def on_pre_save(sender, instance, **kwargs):
        seen.append(("pre_save", sender, instance.pk))

    def on_post_save(sender, instance, created, **kwargs):
        seen.append(("post_save", sender, created, instance))

    def on_post_delete(sender, instance, **kwargs):
        seen.append(("post_delete", sender, instance.token_checksum))

    def on_audit(sender, event, **kwargs):
        seen.append(("audit_event", event.kind, event.pk))

    for model in models:
        pre_save.connect(on_pre_save, sender=model, weak=False)
        post_save.connect(on_post_save, sender=model, weak=False)
    post_delete.connect(on_post_delete, sender=AccessToken, weak=False)
    audit_event.connect(on_audit, weak=False)
    try:
        with CaptureQueriesContext(connection) as queries:
            second = refresh(logged_in, public_app, first["refresh_token"])
    finally:
        for model in models:
            pre_save.disconnect(on_pre_save, sender=model)
            post_save.disconnect(on_post_save, sender=model)
        post_delete.disconnect(on_post_delete, sender=AccessToken)
        audit_event.disconnect(on_audit)
    assert second.status_code == 200, second.content
    assert sum(q["sql"].startswith("WITH") for q in queries.captured_queries) == 1  # receivers change nothing
    access, refresh_row, generation, member = new_rows(second)
    assert sorted((kind, model.__name__) for kind, model, *_ in seen if kind == "pre_save") == sorted(
        ("pre_save", model.__name__) for model in models
    )
    saved = {
        sender: (created, instance) for kind, sender, created, instance in (s for s in seen if s[0] == "post_save")
    }
    assert all(created for created, _ in saved.values()) and set(saved) == set(models)
    assert saved[AccessToken][1].pk == access.pk and saved[RefreshToken][1].pk == refresh_row.pk
    assert saved[RefreshToken][1].access_token_id == access.pk and saved[RefreshTokenGeneration][1].pk == refresh_row.pk
    assert saved[RefreshGeneration][1].pk == generation.pk and not saved[AuditEvent][1]._state.adding
    assert ("post_delete", AccessToken, token_checksum(first["access_token"])) in seen
    assert [s for s in seen if s[0] == "audit_event"] == [("audit_event", "token.refreshed", saved[AuditEvent][1].pk)]


@needs_postgresql
def test_a_rotation_rolled_back_announces_nothing(logged_in, public_app, monkeypatch):
    from mcp_oauth.authorization_server.tokens import rotation

    first = first_pair(logged_in, public_app)
    stale = rotation._presented_row(first["refresh_token"])
    monkeypatch.setattr(rotation, "_presented_row", lambda raw: stale)
    get_refresh_token_model().objects.filter(pk=stale.pk).update(revoked=FIXED)  # RFC 7009, admin… after the read
    saved = []

    def on_post_save(sender, instance, created, **kwargs):
        saved.append(sender)

    post_save.connect(on_post_save, weak=False)
    try:
        response = refresh(logged_in, public_app, first["refresh_token"])
    finally:
        post_save.disconnect(on_post_save)
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    written = (
        get_access_token_model(),
        get_refresh_token_model(),
        RefreshGeneration,
        RefreshTokenGeneration,
        AuditEvent,
    )
    assert [sender for sender in saved if sender in written] == []
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.TOKEN_REFRESHED).exists()


class OwnAccessTokens:
    """A site's validator that writes access tokens itself (see the test below)."""

    written: list = []

    def _create_access_token(self, expires, request, token, source_refresh_token=None):
        access_token = super()._create_access_token(expires, request, token, source_refresh_token)  # type: ignore[misc]
        OwnAccessTokens.written.append(access_token.pk)
        return access_token


@needs_postgresql
def test_a_site_validator_that_writes_its_own_access_tokens_has_them_called(logged_in, public_app, settings):
    from mcp_oauth.authorization_server.validator import MCPOAuth2Validator

    site_validator = type("SiteValidator", (OwnAccessTokens, MCPOAuth2Validator), {"__module__": __name__})
    globals()["SiteValidator"] = site_validator
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "OAUTH2_VALIDATOR_CLASS": f"{__name__}.SiteValidator"}
    OwnAccessTokens.written.clear()
    first = first_pair(logged_in, public_app)
    with CaptureQueriesContext(connection) as queries:
        second = refresh(logged_in, public_app, first["refresh_token"])
    assert second.status_code == 200, second.content
    assert not any(q["sql"].startswith("WITH") for q in queries.captured_queries)  # the seven statements
    assert len(OwnAccessTokens.written) == 2  # code exchange and refresh
    assert OwnAccessTokens.written[-1] == new_rows(second)[0].pk
