"""Tools, resources and prompts in a project package that is not an installed app (issue 29).

``tests/support/site_package`` stands for ``startproject``'s ``mysite``: its ``mcp_tools.py``,
``mcp_resources.py`` and ``mcp_prompts.py`` load when ``TOOL_MODULES`` / ``RESOURCE_MODULES`` /
``PROMPT_MODULES`` name them (then ``tools/list``, ``resources/list`` and ``prompts/list`` show
them), and ``manage.py check`` warns (``mcp_oauth.W022``) about each one nothing names.
"""

from __future__ import annotations

import sys

import pytest
from django.core.checks import run_checks

import mcp_oauth.mcp_server.registry as registry_package
import mcp_oauth.mcp_server.registry.prompts as prompts_module
import mcp_oauth.mcp_server.registry.resources as resources_module
import mcp_oauth.mcp_server.tools as tools_module
from mcp_oauth.mcp_server.registry.prompts import PromptRegistry
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry
from mcp_oauth.mcp_server.tools import ToolRegistry
from mcp_oauth.site_modules import import_site_modules, project_packages
from tests.mcp_oauth.mcp_server.transport.test_modern import body, call_tool, post, result_of

PACKAGE = "tests.support.site_package"
MODULES = {
    "TOOL_MODULES": [f"{PACKAGE}.mcp_tools"],
    "RESOURCE_MODULES": [f"{PACKAGE}.mcp_resources"],
    "PROMPT_MODULES": [f"{PACKAGE}.mcp_prompts"],
}


def w022() -> list[str]:
    return [message.msg for message in run_checks() if message.id == "mcp_oauth.W022"]


@pytest.fixture
def site_package(settings):
    """ROOT_URLCONF in the fixture project package; its MCP modules not yet imported (and forgotten after)."""
    settings.ROOT_URLCONF = f"{PACKAGE}.urls"
    names = [module for modules in MODULES.values() for module in modules]
    for name in names:
        sys.modules.pop(name, None)
    yield settings
    for name in names:
        sys.modules.pop(name, None)


@pytest.fixture
def fresh_registries(settings, monkeypatch):
    """Empty registries served by the endpoint and filled by the fixture package's decorators."""
    tools, resources, prompts = ToolRegistry("site"), ResourceRegistry("site"), PromptRegistry("site")
    monkeypatch.setattr(tools_module, "registry", tools)
    monkeypatch.setattr(tools_module, "tool", tools.tool)
    monkeypatch.setattr(resources_module, "registry", resources)
    monkeypatch.setattr(resources_module, "resource", resources.resource)
    monkeypatch.setattr(prompts_module, "registry", prompts)
    monkeypatch.setattr(prompts_module, "prompt", prompts.prompt)
    monkeypatch.setattr(registry_package, "resource", resources.resource)
    monkeypatch.setattr(registry_package, "prompt", prompts.prompt)
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "TOOL_REGISTRY": tools,
        "RESOURCE_REGISTRY": resources,
        "PROMPT_REGISTRY": prompts,
    }
    return tools, resources, prompts


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, resource=resource.uri)


def test_the_project_packages_are_those_of_the_urlconf_and_the_settings(site_package):
    assert project_packages() == [PACKAGE, "project"]


def test_each_project_package_module_nothing_names_is_reported(site_package):
    assert w022() == [
        "'tests.support.site_package.mcp_tools' is never imported: 'tests.support.site_package' is not an installed app and"
        ' MCP_OAUTH["TOOL_MODULES"] does not name it, so its tools are not served.',
        "'tests.support.site_package.mcp_resources' is never imported: 'tests.support.site_package' is not an installed app and"
        ' MCP_OAUTH["RESOURCE_MODULES"] does not name it, so its resources are not served.',
        "'tests.support.site_package.mcp_prompts' is never imported: 'tests.support.site_package' is not an installed app and"
        ' MCP_OAUTH["PROMPT_MODULES"] does not name it, so its prompts are not served.',
    ]
    (resources,) = [
        message for message in run_checks() if message.id == "mcp_oauth.W022" and "resources" in message.msg
    ]
    assert (
        resources.hint
        == 'Name it in the settings: MCP_OAUTH["RESOURCE_MODULES"] = ["tests.support.site_package.mcp_resources"].'
    )
    assert resources.level == 30  # WARNING


def test_named_modules_are_not_reported(site_package):
    site_package.MCP_OAUTH = {**site_package.MCP_OAUTH, **MODULES}
    assert w022() == []


def test_a_module_named_under_another_kinds_setting_loads_too_and_is_not_reported(site_package):
    """Any of the three settings imports the module; what it registers is served either way."""
    site_package.MCP_OAUTH = {
        **site_package.MCP_OAUTH,
        "TOOL_MODULES": [f"{PACKAGE}.mcp_tools", f"{PACKAGE}.mcp_resources", f"{PACKAGE}.mcp_prompts"],
    }
    assert w022() == []


def test_an_installed_app_as_project_package_is_autodiscovered_and_not_reported(settings):
    """The reference site's ``project`` is an installed app with all three modules: nothing to report."""
    assert settings.ROOT_URLCONF == "project.urls"
    assert w022() == []


def test_a_project_package_without_mcp_modules_is_not_reported(settings):
    settings.ROOT_URLCONF = "tests.support.urls_broken_login"  # package "tests.support": no mcp_tools.py there
    assert w022() == []


@pytest.mark.parametrize("key", ["TOOL_MODULES", "RESOURCE_MODULES", "PROMPT_MODULES"])
def test_a_missing_named_module_is_reported_for_every_setting(settings, key):
    kind = {"TOOL_MODULES": "tools", "RESOURCE_MODULES": "resources", "PROMPT_MODULES": "prompts"}[key]
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, key: ["project.no_such_module", "no_such_package.mcp_x"]}
    messages = [message.msg for message in run_checks() if message.id == "mcp_oauth.W021"]
    assert messages == [
        f"MCP_OAUTH[\"{key}\"] names 'project.no_such_module', which does not exist: its {kind} are not served.",
        f"MCP_OAUTH[\"{key}\"] names 'no_such_package.mcp_x', which does not exist: its {kind} are not served.",
    ]


def test_the_named_modules_load_and_are_listed_and_served(site_package, fresh_registries, client, token):
    tools, resources, prompts = fresh_registries
    site_package.MCP_OAUTH = {**site_package.MCP_OAUTH, **MODULES}
    import_site_modules()

    listed = result_of(post(client, token, body("tools/list")))
    assert [item["name"] for item in listed["tools"]] == ["site_package_whoami"]
    called = result_of(call_tool(client, token, "site_package_whoami"))
    assert called["content"] == [{"type": "text", "text": "alice"}]

    listed = result_of(post(client, token, body("resources/list")))
    assert [(item["uri"], item["name"]) for item in listed["resources"]] == [("site://hello", "site_hello")]
    read = result_of(
        post(client, token, body("resources/read", {"uri": "site://hello"}), **{"Mcp-Name": "site://hello"})
    )
    assert [(entry["uri"], entry["text"]) for entry in read["contents"]] == [("site://hello", "Hello, alice")]

    listed = result_of(post(client, token, body("prompts/list")))
    assert [(item["name"], item["arguments"]) for item in listed["prompts"]] == [
        ("site_haiku", [{"name": "topic", "description": "What to write about", "required": True}])
    ]
    message = body("prompts/get", {"name": "site_haiku", "arguments": {"topic": "tea"}})
    got = result_of(post(client, token, message, **{"Mcp-Name": "site_haiku"}))
    assert [(item["role"], item["content"]["text"]) for item in got["messages"]] == [
        ("user", "Write a haiku about tea.")
    ]


def test_unnamed_project_package_modules_do_not_load(site_package, fresh_registries):
    tools, resources, prompts = fresh_registries
    import_site_modules()
    assert (len(tools), len(resources), len(prompts)) == (0, 0, 0)
    assert not {f"{PACKAGE}.mcp_tools", f"{PACKAGE}.mcp_resources", f"{PACKAGE}.mcp_prompts"} & set(sys.modules)
