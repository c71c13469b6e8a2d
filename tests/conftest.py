"""Shared fixtures: the default resource, users, clients and minted access tokens."""

from __future__ import annotations

import secrets
import threading
import time
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model, set_token_value

from mcp_oauth.shared import throttling
from tests.support.browser import pytest_collection_modifyitems, pytest_terminal_summary  # noqa: F401 - hooks: no Chromium, one line

BASE_URL = "http://testserver"


@pytest.fixture(autouse=True)
def _base_url(settings):
    """Tests talk to Django's test client, whose host is ``testserver``."""
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": BASE_URL}
    settings.ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]
    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.MD5PasswordHasher",  # fast test users
        "mcp_oauth.authorization_server.client_auth.client_secrets.ClientSecretHasher",  # client secrets (DOT CLIENT_SECRET_HASHER)
    ]
    from django.core.cache import caches

    for cache in caches.all():  # throttle counters and CIMD back-offs must not leak between tests
        cache.clear()
    yield


def _delete_committed_trail_rows() -> None:
    """Delete the tool-call rows on a connection of its own (a thread's), as the writer wrote them."""
    from django.db import connections

    from mcp_oauth.models import ToolCallRecord, ToolCallUse

    try:
        ToolCallRecord.objects.all()._raw_delete(ToolCallRecord.objects.db)
        ToolCallUse.objects.all()._raw_delete(ToolCallUse.objects.db)
    except Exception:  # noqa: BLE001 - the database is gone or locked (SQLite): nothing committed to leak
        pass
    finally:
        connections["default"].close()


@pytest.fixture(autouse=True)
def _audit_trail_rows_stay_in_their_test():
    """The audit trail's writer thread inserts rows on its own connection, so they are committed
    outside a test's transaction and its rollback (``ToolCallRecord.user`` has no database
    constraint): after a test whose calls were written, write what is queued and delete those rows,
    so the next test starts without them. (Torn down before pytest-django's database teardown.)
    PostgreSQL only: on SQLite the writer's INSERT waits for the test's transaction (one lock for
    the whole database), so waiting for it here would only wait out the timeouts."""
    from django.db import connection

    from mcp_oauth.observability.audit_trail import writer

    before = writer.enqueued
    yield
    if writer.enqueued == before or connection.vendor != "postgresql":
        return
    writer.flush()
    cleaner = threading.Thread(target=_delete_committed_trail_rows, name="audit-trail-test-cleanup")
    cleaner.start()
    cleaner.join(30)


@pytest.fixture
def no_committed_trail_rows():
    """Before a test that reads every tool-call row (exports, retention): what the audit trail's
    writer committed for an earlier test (a live server's call written after that test's own
    cleanup) is written now and deleted, on a connection of its own. PostgreSQL only, as above."""
    from django.db import connection

    from mcp_oauth.observability.audit_trail import writer

    if connection.vendor == "postgresql":
        writer.flush()
        cleaner = threading.Thread(target=_delete_committed_trail_rows, name="audit-trail-test-cleanup")
        cleaner.start()
        cleaner.join(30)
    yield


@pytest.fixture(autouse=True)
def _skills_flag_stays_in_its_test():
    """The "any skill in the database?" answer is cached (mcp_oauth.mcp_server.skills.catalog); a
    rolled-back test's skills must not stay announced in the next test."""
    yield
    from django.core.cache import cache

    from mcp_oauth.mcp_server.skills.catalog import DATABASE_FLAG_KEY, forget_folder_flag

    try:
        cache.delete(DATABASE_FLAG_KEY)
    except Exception:  # noqa: BLE001 - a test pointed the cache at nothing: it cannot hold the flag
        pass
    forget_folder_flag()


@pytest.fixture
def resource(db, _base_url):
    from mcp_oauth.resource_server.default_resource import ensure_default_resource

    return ensure_default_resource()


@pytest.fixture
def user(db, django_user_model):
    return django_user_model.objects.create_user("alice", "alice@example.com", "correct horse battery")


@pytest.fixture
def other_user(db, django_user_model):
    return django_user_model.objects.create_user("bob", "bob@example.com", "correct horse battery")


@pytest.fixture
def public_app(db):
    Application = get_application_model()
    return Application.objects.create(
        name="Test client",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1/callback https://client.example.com/cb",
    )


@pytest.fixture
def mint_token(db):
    """``mint_token(user, application, scope="mcp", resource=<uri or None>, expires_in=3600) -> raw token``.

    Stores the token hashed, as the server does (COMPLIANT_BCP_RFC9700_TOKEN_STORAGE).
    """

    def mint(user, application, scope="mcp", resource=None, expires_in=3600):
        AccessToken = get_access_token_model()
        raw = secrets.token_urlsafe(32)
        token = AccessToken(
            user=user,
            application=application,
            scope=scope,
            expires=timezone.now() + timedelta(seconds=expires_in),
            resource=[resource] if resource else [],
        )
        set_token_value(token, raw)
        token.save()
        return raw

    return mint


@pytest.fixture
def service(resource):
    """A confidential client_credentials client: ``(application, plain secret)``."""
    Application = get_application_model()
    app = Application(name="svc", client_type="confidential", authorization_grant_type="client-credentials")
    secret = app.client_secret
    app.save()
    return app, secret


@pytest.fixture
def steady_throttle_clock(monkeypatch):
    """The throttles' clock (:mod:`mcp_oauth.shared.throttling`) stands still at the start of a minute, in
    the middle of an hour: a test that counts up to a limit cannot straddle a fixed window's
    boundary, where the count starts again. Nothing else's clock is touched."""
    now = int(time.time() // 3600) * 3600 + 1800.0
    monkeypatch.setattr(throttling, "time", SimpleNamespace(time=lambda: now))
    return now
