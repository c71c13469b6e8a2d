"""The MCP server's system checks (mcp_oauth.mcp_server.checks): the registries (E020, E023,
E024), the requestState keys (E060, W060) and the Tasks settings (E092)."""

from __future__ import annotations

import pytest

from mcp_oauth.mcp_server.checks import (
    check_request_state_keys,
    check_request_state_keys_set,
    check_resource_and_prompt_registries,
    check_tasks,
    check_tool_registry,
)

#: Something importable that is not a registry.
NOT_A_REGISTRY = "mcp_oauth.mcp_server.checks.check_tasks"


def ids(check, settings, **overrides):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, **overrides}
    return [message.id for message in check(None)]


def test_the_defaults_pass(settings):
    for check in (check_tool_registry, check_resource_and_prompt_registries, check_request_state_keys, check_tasks):
        assert ids(check, settings) == []


@pytest.mark.parametrize("path", ["no.such.module.REGISTRY", NOT_A_REGISTRY])
def test_a_tool_registry_that_does_not_import_or_is_not_one_is_e020(settings, path):
    assert ids(check_tool_registry, settings, TOOL_REGISTRY=path) == ["mcp_oauth.E020"]


def test_resource_and_prompt_registries_are_e023_and_e024(settings):
    assert ids(
        check_resource_and_prompt_registries, settings, RESOURCE_REGISTRY=NOT_A_REGISTRY, PROMPT_REGISTRY="no.such.X"
    ) == ["mcp_oauth.E023", "mcp_oauth.E024"]


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ([], []),
        (["k" * 32], []),
        ([b"k" * 32, "n" * 40], []),
        (["short"], ["mcp_oauth.E060"]),
        ("k" * 64, ["mcp_oauth.E060"]),
        ([42], ["mcp_oauth.E060"]),
    ],
)
def test_request_state_keys(settings, keys, expected):
    assert ids(check_request_state_keys, settings, REQUEST_STATE_KEYS=keys) == expected


def test_no_request_state_keys_warns_on_deploy(settings):
    assert ids(check_request_state_keys_set, settings, REQUEST_STATE_KEYS=[]) == ["mcp_oauth.W060"]
    assert ids(check_request_state_keys_set, settings, REQUEST_STATE_KEYS=["k" * 32]) == []


@pytest.mark.parametrize(
    "overrides",
    [
        {"TASKS_EXECUTOR": "process"},
        {"TASKS_TTL_MS": 0},
        {"TASKS_POLL_INTERVAL_MS": True},
        {"TASKS_HEARTBEAT_SECONDS": 0},
        {"TASKS_LEASE_SECONDS": 10, "TASKS_HEARTBEAT_SECONDS": 6},
    ],
)
def test_a_tasks_setting_out_of_range_is_e092(settings, overrides):
    assert ids(check_tasks, settings, **overrides) == ["mcp_oauth.E092"]
