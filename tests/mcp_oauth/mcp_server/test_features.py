"""The composition module (mcp_oauth.mcp_server.features), the transport's capability announcement and the
base the tool and prompt registries share (issue 20)."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import mcp_types as types
import pytest
from django.core.checks import run_checks

import mcp_oauth
from mcp_oauth.mcp_server import features
from mcp_oauth.mcp_server.mcp_tasks.listen import listen_tasks
from mcp_oauth.mcp_server.registry.base import NamedRegistry
from mcp_oauth.mcp_server.registry.handlers import get_prompt_registry
from mcp_oauth.mcp_server.registry.prompts import PromptRegistry
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry, active_resource_registry
from mcp_oauth.mcp_server.tools import ToolContext, ToolRegistry
from mcp_oauth.mcp_server.transport import capabilities, modern, tool_methods
from mcp_oauth.mcp_server.transport.methods import methods
from mcp_oauth.mcp_server.transport.table import LEGACY, MODERN, MethodTable
from mcp_oauth.settings import mcp_oauth_settings

TRANSPORT = Path(mcp_oauth.__file__).parent / "transport"
FEATURES = (
    "mcp_oauth.mcp_server.registry",
    "mcp_oauth.mcp_server.mcp_tasks",
    "mcp_oauth.mcp_server.tools",
    "mcp_oauth.mcp_server.features",
)


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports (at any level, relative ones resolved from mcp_oauth.mcp_server.transport)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "mcp_oauth.mcp_server.transport" if node.level == 1 else "mcp_oauth" if node.level == 2 else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("path", sorted(TRANSPORT.glob("*.py")), ids=lambda p: p.name)
def test_the_transport_core_imports_no_feature(path):
    imported = _imported(path)
    assert not [name for name in imported if name.startswith(FEATURES)], path.name


def test_install_puts_every_feature_on_a_table_and_may_run_again():
    table = MethodTable()
    assert features.install(table) is table
    features.install(table)  # ready() twice (tests, autoreload): no duplicate-method error
    for name in ("tools/list", "tools/call", "resources/read", "prompts/get", "completion/complete"):
        assert table.get(name, LEGACY) is not None and table.get(name, MODERN) is not None
    assert table.get("resources/subscribe", MODERN) is None  # 2025-11-25 sessions only
    assert table.get("tasks/get", MODERN) is not None and table.get("tasks/get", LEGACY) is None
    assert "initialize" not in table  # the core's own methods live in transport.methods
    assert tool_methods.defer_to_task is not None
    assert modern.listen_hooks.count(listen_tasks) == 1


def test_the_endpoint_table_has_the_core_and_the_features_after_ready():
    for name in ("initialize", "server/discover", "tools/call", "prompts/list", "tasks/cancel"):
        assert name in methods


def test_a_capability_provider_is_announced_in_both_eras_and_can_be_withdrawn():
    def provider():
        return {"completions": types.CompletionsCapability()}

    capabilities.register_provider(provider)
    capabilities.register_provider(provider)  # once only
    try:
        assert capabilities.discover_capabilities()["completions"] == {}
        assert capabilities.initialize_capabilities().completions is not None
    finally:
        capabilities.unregister_provider(provider)
    assert provider not in capabilities._providers


def test_tool_and_prompt_registries_share_registration_rules_and_change_listeners():
    tools, prompts = ToolRegistry("shared-tools"), PromptRegistry("shared-prompts")
    assert isinstance(tools, NamedRegistry) and isinstance(prompts, NamedRegistry)
    changes = []
    tools.on_change(lambda: changes.append("tool"))
    prompts.on_change(lambda: changes.append("prompt"))

    def echo(ctx: ToolContext, text: str) -> str:
        return text

    tools.register(echo, scopes="mcp mcp")
    prompts.register(lambda ctx, topic: topic, name="echo")
    assert changes == ["tool", "prompt"]
    assert tools.get("echo").scopes == ("mcp",) and tools.get("echo").context_param == "ctx"
    assert [item.name for item in tools] == ["echo"] and len(prompts) == 1 and "echo" in prompts
    with pytest.raises(ValueError, match="a tool named 'echo' is already registered"):
        tools.register(echo)
    with pytest.raises(ValueError, match="invalid prompt name"):
        prompts.register(echo, name="bad name")
    with pytest.raises(ValueError, match="invalid scope"):
        tools.register(echo, name="other", scopes=['bad"scope'])
    assert tools.unregister("echo").name == "echo" and tools.get("echo") is None
    assert changes == ["tool", "prompt", "tool"]


def test_a_tool_context_found_by_annotation_and_sync_tools_run_in_a_thread():
    tools = ToolRegistry("context")

    def annotated(text: str, context: ToolContext) -> str:
        return f"{text}:{type(context).__name__}"

    tool = tools.register(annotated)
    assert tool.context_param == "context"
    assert tool.parameter_names == ["text"]
    result = asyncio.run(tool.invoke(object(), {"text": "hi"}))  # type: ignore[arg-type]
    assert result == "hi:object"


RESOURCES = ResourceRegistry("by-path")
PROMPTS = PromptRegistry("by-path")


def test_resource_and_prompt_registries_named_by_path_are_imported_once(settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "RESOURCE_REGISTRY": "tests.mcp_oauth.mcp_server.test_features.RESOURCES",
        "PROMPT_REGISTRY": "tests.mcp_oauth.mcp_server.test_features.PROMPTS",
    }
    assert active_resource_registry() is RESOURCES and get_prompt_registry() is PROMPTS
    assert vars(mcp_oauth_settings)["RESOURCE_REGISTRY"] is RESOURCES  # kept: no import on the next request
    assert vars(mcp_oauth_settings)["PROMPT_REGISTRY"] is PROMPTS
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "RESOURCE_REGISTRY": "tests.nowhere.registry"}
    errors = [m for m in run_checks() if m.id == "mcp_oauth.E023"]
    assert len(errors) == 1 and "cannot be imported" in errors[0].msg
