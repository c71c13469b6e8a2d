"""Dotted-path settings are imported once by the settings object (DRF ``IMPORT_STRINGS``), kept
until ``MCP_OAUTH`` changes, and read from it everywhere: no ``import_string()`` by hand."""

from __future__ import annotations

import pytest

from mcp_oauth.adapter import DefaultMCPAdapter, get_adapter
from mcp_oauth.checks import check_resource_and_prompt_registries, check_tool_registry
from mcp_oauth.mcp_server.registry.prompts import PromptRegistry
from mcp_oauth.mcp_server.registry.prompts import registry as default_prompts
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry
from mcp_oauth.mcp_server.registry.resources import registry as default_resources
from mcp_oauth.settings import DEFAULTS, IMPORT_STRINGS, mcp_oauth_settings
from mcp_oauth.shared.throttling import caller_key

#: A second registry of each kind, for settings that name another one.
other_resources = ResourceRegistry()
other_prompts = PromptRegistry()


class OtherAdapter(DefaultMCPAdapter):
    pass


def test_every_dotted_path_setting_is_an_import_string():
    assert {"ADAPTER", "TOOL_REGISTRY", "RESOURCE_REGISTRY", "PROMPT_REGISTRY"} <= IMPORT_STRINGS
    assert {"THROTTLE_KEY_FUNCTION", "TASKS_RESULT_CIPHER"} <= IMPORT_STRINGS
    assert IMPORT_STRINGS <= set(DEFAULTS)


def test_registries_and_adapter_are_imported_once_and_kept(settings):
    # the reference site names its own adapter (project.mcp_adapter): without it, the default
    settings.MCP_OAUTH = {key: value for key, value in settings.MCP_OAUTH.items() if key != "ADAPTER"}
    assert mcp_oauth_settings.RESOURCE_REGISTRY is default_resources
    assert mcp_oauth_settings.PROMPT_REGISTRY is default_prompts
    assert mcp_oauth_settings.ADAPTER is DefaultMCPAdapter
    for key in ("RESOURCE_REGISTRY", "PROMPT_REGISTRY", "ADAPTER"):
        assert key in vars(mcp_oauth_settings)  # kept: the next access imports nothing


def test_a_settings_change_imports_the_new_paths(settings):
    settings.MCP_OAUTH = {key: value for key, value in settings.MCP_OAUTH.items() if key != "ADAPTER"}
    first = get_adapter()
    assert type(first) is DefaultMCPAdapter and get_adapter() is first is mcp_oauth_settings.adapter
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "RESOURCE_REGISTRY": f"{__name__}.other_resources",
        "PROMPT_REGISTRY": f"{__name__}.other_prompts",
        "ADAPTER": f"{__name__}.OtherAdapter",
    }
    assert mcp_oauth_settings.RESOURCE_REGISTRY is other_resources
    assert mcp_oauth_settings.PROMPT_REGISTRY is other_prompts
    assert type(get_adapter()) is OtherAdapter and get_adapter() is get_adapter()


def test_no_adapter_setting_means_the_default_class(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": None}
    assert type(get_adapter()) is DefaultMCPAdapter


def test_objects_may_be_given_instead_of_paths(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "RESOURCE_REGISTRY": other_resources, "ADAPTER": OtherAdapter}
    assert mcp_oauth_settings.RESOURCE_REGISTRY is other_resources
    assert type(get_adapter()) is OtherAdapter


def test_configured_names_the_path_as_written(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "PROMPT_REGISTRY": "no.such.registry"}
    assert mcp_oauth_settings.configured("PROMPT_REGISTRY") == "no.such.registry"
    assert mcp_oauth_settings.configured("RESOURCE_REGISTRY") == DEFAULTS["RESOURCE_REGISTRY"]
    with pytest.raises(AttributeError):
        mcp_oauth_settings.configured("NO_SUCH_SETTING")


def test_check_messages_name_the_path_and_the_cause(settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "TOOL_REGISTRY": "no_such_package.registry",
        "PROMPT_REGISTRY": "no_such_package.prompts",
    }
    [tool] = check_tool_registry(None)
    assert tool.id == "mcp_oauth.E020"
    assert "'no_such_package.registry' cannot be imported: No module named 'no_such_package'" in tool.msg
    [prompt] = check_resource_and_prompt_registries(None)
    assert prompt.id == "mcp_oauth.E024" and "'no_such_package.prompts'" in prompt.msg


def test_the_throttle_key_function_is_called_as_imported(settings, rf):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "THROTTLE_KEY_FUNCTION": f"{__name__}.by_header"}
    request = rf.get("/", HTTP_X_CALLER="alice")
    assert caller_key(request, "token") == "token:alice"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "THROTTLE_KEY_FUNCTION": None}
    assert caller_key(request, "token") == "127.0.0.1"


def by_header(request, scope):
    return f"{scope}:{request.headers['X-Caller']}"
