"""Draining on SIGTERM (mcp_oauth.mcp_server.transport.drain): the flag, once; the listeners of
open streams told once each, a late one at once, a failing one not stopping the others."""

from __future__ import annotations

import pytest

from mcp_oauth.mcp_server.transport import drain


@pytest.fixture(autouse=True)
def serving():
    drain.reset()
    yield
    drain.reset()


def test_begin_tells_each_listener_once_and_a_late_one_at_once():
    calls: list[str] = []

    def first():
        calls.append("first")

    def failing():
        calls.append("failing")
        raise RuntimeError("stream already gone")

    def removed():
        calls.append("removed")

    for callback in (first, failing, removed):
        drain.add_listener(callback)
    drain.remove_listener(removed)
    drain.remove_listener(removed)  # no error the second time
    assert drain.is_draining() is False
    drain.begin()
    drain.begin()  # idempotent: nobody told twice
    assert drain.is_draining() is True
    assert sorted(calls) == ["failing", "first"]

    def late():
        calls.append("late")

    drain.add_listener(late)
    assert calls[-1] == "late"
    for callback in (first, failing, late):
        drain.remove_listener(callback)


def test_reset_serves_again():
    drain.begin()
    drain.reset()
    assert drain.is_draining() is False
