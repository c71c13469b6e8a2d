"""The resource server's system checks (mcp_oauth.resource_server.checks): the decoded-token cache
size (E070) and the revocation settings (E071)."""

from __future__ import annotations

import pytest

from mcp_oauth.resource_server.checks import check_decoded_token_entries, check_revocation_settings


@pytest.mark.parametrize(
    ("size", "expected"),
    [(0, []), (256, []), (-1, ["mcp_oauth.E070"]), (True, ["mcp_oauth.E070"]), ("9", ["mcp_oauth.E070"])],
)
def test_decoded_token_entries(settings, size, expected):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DECODED_TOKEN_ENTRIES": size}
    assert [message.id for message in check_decoded_token_entries(None)] == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"REVOCATION_CHECK_SECONDS": -1}, ["mcp_oauth.E071"]),
        ({"REVOCATION_CHECK_SECONDS": "5"}, ["mcp_oauth.E071"]),
        ({"TOKEN_CACHE_SHARED": "yes"}, ["mcp_oauth.E071"]),
        ({"REVOCATION_CHECK_SECONDS": -1, "TOKEN_CACHE_SHARED": 1.5}, ["mcp_oauth.E071", "mcp_oauth.E071"]),
    ],
)
def test_revocation_settings_that_cannot_work_are_e071(settings, overrides, expected):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, **overrides}
    assert [message.id for message in check_revocation_settings(None)] == expected


def test_a_shared_token_cache_never_warns(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOKEN_CACHE_SHARED": True, "WAKEUP_URL": "http://127.0.0.1:9/wake"}
    assert check_revocation_settings(None) == []


def test_a_cache_of_each_process_in_a_multi_process_site_is_w071(settings, monkeypatch):
    monkeypatch.delenv("WEB_CONCURRENCY", raising=False)
    monkeypatch.delenv("WORKERS", raising=False)
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOKEN_CACHE_SHARED": False, "WAKEUP_URL": "http://127.0.0.1:9/wake"}
    (warning,) = check_revocation_settings(None)
    assert warning.id == "mcp_oauth.W071"
    assert 'MCP_OAUTH["WAKEUP_URL"] (wake-ups between processes)' in warning.msg
