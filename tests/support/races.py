"""A grant paused inside its transaction while a competing request runs: the rotation races' tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import connection, connections, transaction

__all__ = ["password_change", "race_against_transaction", "race_inside_grant", "someone_waits"]


def someone_waits() -> bool:
    """Whether a session of the test database waits for a lock (PostgreSQL; False elsewhere)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE NOT l.granted AND a.datname = current_database()"
        )
        return cursor.fetchone()[0] > 0


def race_inside_grant(
    monkeypatch: Any, grant: Callable[[], Any], competitor: Callable[[], Any], settle_seconds: float = 10.0
) -> tuple[Any, Any]:
    """Run ``grant()`` on a thread and hold it inside its transaction, its rows written and not
    yet committed (at the end of ``MCPOAuth2Validator._save_bearer_token``, which DOT runs in the
    grant's transaction); then run ``competitor()`` on another thread and release the grant once
    the competitor waits for a lock on PostgreSQL (:func:`someone_waits`), has finished, or
    ``settle_seconds`` have passed (on SQLite, which shows no lock waits, pass a short time: the
    competitor is under way by then).

    Both callables close their own database connections. :returns: ``(grant(), competitor())``.
    """
    from mcp_oauth.authorization_server.validator import MCPOAuth2Validator

    paused, release = threading.Event(), threading.Event()
    save_bearer_token = MCPOAuth2Validator._save_bearer_token

    def held(self, token, request, *args, **kwargs):
        result = save_bearer_token(self, token, request, *args, **kwargs)
        paused.set()
        assert release.wait(timeout=30)
        return result

    monkeypatch.setattr(MCPOAuth2Validator, "_save_bearer_token", held)
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            granting = pool.submit(grant)
            assert paused.wait(timeout=30)
            competing = pool.submit(competitor)
            deadline = time.monotonic() + settle_seconds
            while not competing.done() and not someone_waits() and time.monotonic() < deadline:
                time.sleep(0.05)
            release.set()
            return granting.result(timeout=60), competing.result(timeout=60)
    finally:
        release.set()
        monkeypatch.setattr(MCPOAuth2Validator, "_save_bearer_token", save_bearer_token)


def race_against_transaction(
    hold: Callable[[], Any],
    competitor: Callable[[], Any],
    then: Callable[[Any], Any] | None = None,
    settle_seconds: float = 10.0,
) -> Any:
    """Run ``hold()`` in a transaction on a thread and keep the transaction open; then run
    ``competitor()`` on another thread, and once the competitor waits for a lock on PostgreSQL
    (:func:`someone_waits`), has finished, or ``settle_seconds`` have passed, run ``then(what
    hold() returned)`` in the same transaction and commit it.

    The holder's connections are closed; the competitor closes its own. :returns: ``competitor()``.
    """
    held, proceed = threading.Event(), threading.Event()

    def holding() -> None:
        try:
            with transaction.atomic():
                kept = hold()
                held.set()
                assert proceed.wait(timeout=30)
                if then is not None:
                    then(kept)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=2) as pool:
        holder = pool.submit(holding)
        try:
            assert held.wait(timeout=30)
            competing = pool.submit(competitor)
            deadline = time.monotonic() + settle_seconds
            while not competing.done() and not someone_waits() and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            proceed.set()
        holder.result(timeout=30)
        return competing.result(timeout=30)


def password_change(user: Any) -> Callable[[], None]:
    """A competitor for :func:`race_inside_grant`: ``user`` changes their password (their grants are
    revoked, :mod:`mcp_oauth.authorization_server.user_data.lifecycle`), then the thread's connections are closed."""

    def change() -> None:
        try:
            user.set_password("a new password")
            user.save()
        finally:
            connections.close_all()

    return change
