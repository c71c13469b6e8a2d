"""What the organization tests share (issue 31): a tool registry that says which organization a
call acts for, organizations with members, tokens bound to one (``TokenOrganization`` rows, as the
token endpoint writes them), and one request in each era through Django's test client.

``REGISTRY`` is served with ``MCP_OAUTH["TOOL_REGISTRY"] = "tests.support.organizations.REGISTRY"``.
"""

from __future__ import annotations

import json
from typing import Any

from django.utils import timezone

from elicitation.api import elicit_form
from elicitation.form import ElicitationSchema
from mcp_oauth.mcp_server.mcp_tasks import TaskPolicy
from mcp_oauth.mcp_server.tools import InputRequest, ToolContext, ToolRegistry
from mcp_oauth.models import Organization, OrganizationMembership, TokenOrganization
from mcp_oauth.resource_server.cache import token_checksum

REGISTRY = ToolRegistry("organization-tests")
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
TASKS = "io.modelcontextprotocol/tasks"
CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
NAME_FORM = ElicitationSchema({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})


@REGISTRY.tool
def who(ctx: ToolContext) -> dict:
    """The user, the organization (slug or None) and the resource of the call."""
    return {
        "user": ctx.user.get_username() if ctx.user is not None else None,
        "organization": ctx.organization.slug if ctx.organization is not None else None,
        "resource": ctx.resource.uri,
    }


@REGISTRY.tool
def echo(ctx: ToolContext, text: str) -> str:
    """Repeat ``text``."""
    return text


@REGISTRY.tool
async def ask(ctx: ToolContext) -> str:
    """Ask the user's name (a form elicitation)."""
    answer = await elicit_form(ctx, "Your name?", NAME_FORM)
    return f"hello {answer.content['name']}" if answer.action == "accept" else answer.action


@REGISTRY.tool(task=TaskPolicy("always"))
async def slow(ctx: ToolContext) -> str:
    """Runs as a task (SEP-2663)."""
    return "done"


@REGISTRY.tool(task=TaskPolicy("always"))
async def confirm(ctx: ToolContext) -> str:
    """A task that waits for the user's confirmation (``input_required`` until answered)."""
    answer = (await ctx.request_inputs({"ok": InputRequest.elicit("Go on?", CONFIRM)}))["ok"]
    return "confirmed" if answer.get("action") == "accept" else "stopped"


def organization(slug: str, *members: Any, role: str = "member", **fields: Any) -> Organization:
    """A new organization ``slug`` (name = slug upper-cased) with ``members``."""
    org = Organization.objects.create(slug=slug, name=slug.upper(), **fields)
    for user in members:
        OrganizationMembership.objects.create(organization=org, user=user, role=role)
    return org


def bind(raw_token: str, org: Organization, kind: str = "access_token") -> TokenOrganization:
    """The ``TokenOrganization`` row of ``raw_token`` (as the token endpoint writes it)."""
    return TokenOrganization.objects.create(
        token_checksum=token_checksum(raw_token),
        token_kind=kind,
        organization=org,
        expires=timezone.now() + timezone.timedelta(hours=1),
    )


def modern(client: Any, path: str, token: str, method: str, params: dict | None = None, caps: dict | None = None):
    """One 2026-07-28 request (``_meta`` envelope and the headers it mirrors)."""
    params = dict(params or {})
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps
        if caps is not None
        else {"elicitation": {"form": {}}, "extensions": {TASKS: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "org-tests", "version": "1"},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": ACCEPT,
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    name = params.get("name") if method == "tools/call" else params.get("taskId")
    if isinstance(name, str):
        headers["Mcp-Name"] = name
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return client.post(path, json.dumps(message), content_type="application/json", headers=headers)


def initialize(client: Any, path: str, token: str) -> str:
    """A 2025-11-25 session at ``path``: its id."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "org-tests", "version": "1"}},
    }
    response = client.post(
        path,
        json.dumps(message),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", "Accept": ACCEPT},
    )
    assert response.status_code == 200, response.content
    return response["Mcp-Session-Id"]


def legacy(client: Any, path: str, token: str, session_id: str, method: str, params: dict | None = None):
    """One 2025-11-25 request in session ``session_id``."""
    message = {"jsonrpc": "2.0", "id": 2, "method": method, "params": params or {}}
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": ACCEPT,
        "MCP-Protocol-Version": LEGACY,
        "Mcp-Session-Id": session_id,
    }
    return client.post(path, json.dumps(message), content_type="application/json", headers=headers)


def structured(response: Any) -> dict:
    """The ``structuredContent`` of a ``tools/call`` answer."""
    assert response.status_code == 200, response.content
    data = response.json()
    assert "error" not in data, data
    return data["result"]["structuredContent"]
