"""How a tool takes part in the Tasks extension (mcp_oauth.mcp_server.mcp_tasks.policy): optional runs inline without the extension, always needs it (-32021), never answers a plain result."""

from __future__ import annotations

import pytest

from mcp_oauth.mcp_server.mcp_tasks.store import EXTENSION
from mcp_oauth.models import McpTask
from tests.mcp_oauth.mcp_server.mcp_tasks.test_runner import (  # noqa: F401 - fixtures
    REGISTRY,
    SEEN,
    TASK_CAPS,
    V,
    _settings,
    client,
    compute,
    error,
    post,
    result,
    start,
    token,
    tool_error,
)

pytestmark = pytest.mark.django_db(transaction=True)


@REGISTRY.tool(task="never")
def plain() -> str:
    return "plain"


def test_optional_tool_without_the_extension_runs_inline(client, token):
    got = start(client, token, "compute", {"label": "inline"}, caps={})
    assert got["resultType"] == "complete"
    assert got["content"] == [{"type": "text", "text": "done inline"}]
    assert not McpTask.objects.exists()


def test_always_tool_without_the_extension_is_32021(client, token):
    response = post(client, token, "tools/call", {"name": "tool_error", "arguments": {}}, caps={})
    assert error(response) == {
        "code": -32021,
        "message": f"Missing required client capability: this tool runs as a task ({EXTENSION})",
        "data": {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    }
    assert not McpTask.objects.exists()


def test_never_tool_with_the_extension_is_a_plain_result(client, token):
    assert start(client, token, "plain")["content"] == [{"type": "text", "text": "plain"}]
