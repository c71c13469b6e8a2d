"""Organization isolation as attacks (issue 31): what one organization holds is never reached
from another, and a removed member keeps nothing.

* a token for organization A at B's endpoint: 401 ``invalid_token`` (RFC 8707 audience);
* a Task id, an MCP session id, an elicitation (its ``requestState``) of A used with a token of the
  same user and client acting for B: answered exactly as an unknown id;
* a removed member's token, Task and elicitation;
* a ``TokenOrganization`` that points at an organization the user is not a member of;
* ``enabled_tools``: a disabled tool is answered exactly as an unknown one, in both eras.
"""

from __future__ import annotations

import time

import pytest
from django.test import Client

from elicitation.models import Elicitation
from mcp_oauth.models import McpSession, McpTask, OrganizationMembership
from tests.support.organizations import bind, initialize, legacy, modern, organization, structured

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _tools(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_REGISTRY": "tests.support.organizations.REGISTRY"}


@pytest.fixture
def two(user):
    """Organizations A (``acme``) and B (``globex``), ``user`` a member of both."""
    return organization("acme", user), organization("globex", user)


@pytest.fixture
def tokens(two, resource, user, public_app, mint_token):
    """Two tokens of the same user and client on the shared endpoint: one chosen for A, one for B."""
    a, b = two
    token_a, token_b = (
        mint_token(user, public_app, resource=resource.uri),
        mint_token(user, public_app, resource=resource.uri),
    )
    bind(token_a, a)
    bind(token_b, b)
    return token_a, token_b


def test_a_token_for_a_at_bs_endpoint_is_401(two, user, public_app, mint_token):
    token = mint_token(user, public_app, resource="http://testserver/mcp/o/acme")
    assert structured(modern(Client(), "/mcp/o/acme", token, "tools/call", {"name": "who"}))["organization"] == "acme"
    response = modern(Client(), "/mcp/o/globex", token, "tools/call", {"name": "who"})
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == (
        'Bearer resource_metadata="http://testserver/.well-known/oauth-protected-resource/mcp/o/globex", '
        'scope="mcp", error="invalid_token", error_description="The access token was not issued for this resource."'
    )


def test_a_token_of_the_shared_endpoint_is_refused_at_an_organization_endpoint(two, tokens):
    response = modern(Client(), "/mcp/o/acme", tokens[0], "tools/call", {"name": "who"})
    assert response.status_code == 401 and 'error="invalid_token"' in response["WWW-Authenticate"]


def test_a_token_whose_organization_the_user_is_not_a_member_of_is_401(
    resource, user, other_user, public_app, mint_token
):
    foreign = organization("initech", other_user)
    token = mint_token(user, public_app, resource=resource.uri)
    bind(token, foreign)
    response = modern(Client(), "/mcp", token, "tools/call", {"name": "who"})
    assert response.status_code == 401
    assert 'error="invalid_token", error_description="The access token is invalid."' in response["WWW-Authenticate"]


def _create_task(token: str, name: str = "slow") -> str:
    response = modern(Client(), "/mcp", token, "tools/call", {"name": name, "arguments": {}})
    assert response.status_code == 200, response.content
    result = response.json()["result"]
    assert result["resultType"] == "task"
    return result["taskId"]


@pytest.mark.django_db(transaction=True)  # the task row is written on a thread of its own
@pytest.mark.parametrize("method", ["tasks/get", "tasks/cancel"])
def test_a_task_of_a_is_unknown_to_b(tokens, method):
    token_a, token_b = tokens
    task_id = _create_task(token_a)
    assert McpTask.objects.get(task_id=task_id).organization.slug == "acme"
    from_b = modern(Client(), "/mcp", token_b, method, {"taskId": task_id})
    unknown = modern(Client(), "/mcp", token_b, method, {"taskId": "0" * len(task_id)})
    assert (from_b.status_code, from_b.json()) == (unknown.status_code, unknown.json())
    assert from_b.json()["error"] == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
    assert modern(Client(), "/mcp", token_a, "tasks/get", {"taskId": task_id}).json()["result"]["taskId"] == task_id
    assert McpTask.objects.get(task_id=task_id).cancel_requested_at is None


def test_a_session_of_a_is_unknown_to_b(tokens):
    token_a, token_b = tokens
    session_id = initialize(Client(), "/mcp", token_a)
    assert McpSession.objects.get(pk=session_id).organization.slug == "acme"
    call = {"name": "who", "arguments": {}}
    assert structured(legacy(Client(), "/mcp", token_a, session_id, "tools/call", call))["organization"] == "acme"
    from_b = legacy(Client(), "/mcp", token_b, session_id, "tools/call", call)
    unknown = legacy(Client(), "/mcp", token_b, "x" * len(session_id), "tools/call", call)
    assert from_b.status_code == unknown.status_code == 404
    assert {**from_b.json(), "id": None} == {**unknown.json(), "id": None}


def test_an_elicitation_of_a_does_not_open_for_b(tokens):
    token_a, token_b = tokens
    asked = modern(Client(), "/mcp", token_a, "tools/call", {"name": "ask", "arguments": {}})
    result = asked.json()["result"]
    assert result["resultType"] == "input_required"
    row = Elicitation.objects.get()
    assert row.organization.slug == "acme"
    (key,) = result["inputRequests"]
    answer = {"action": "accept", "content": {"name": "Mallory"}}
    retry = {"name": "ask", "arguments": {}, "requestState": result["requestState"], "inputResponses": {key: answer}}
    from_b = modern(Client(), "/mcp", token_b, "tools/call", retry)
    forged = modern(Client(), "/mcp", token_b, "tools/call", {**retry, "requestState": "v1.x.AAAA"})
    assert (from_b.status_code, from_b.json()) == (forged.status_code, forged.json())
    assert from_b.json()["error"]["code"] == -32602
    row.refresh_from_db()
    assert row.status == Elicitation.Status.PENDING
    from_a = modern(Client(), "/mcp", token_a, "tools/call", retry)
    assert from_a.json()["result"]["content"][0]["text"] == "hello Mallory"


@pytest.mark.django_db(transaction=True)
def test_a_removed_member_keeps_neither_token_nor_task_nor_elicitation(two, tokens, user):
    a, _ = two
    token_a, token_b = tokens
    task_id = _create_task(token_a, "confirm")
    deadline = time.monotonic() + 10
    while McpTask.objects.get(task_id=task_id).status == McpTask.Status.WORKING and time.monotonic() < deadline:
        time.sleep(0.05)  # its executor reaches the question
    assert McpTask.objects.get(task_id=task_id).status == McpTask.Status.INPUT_REQUIRED
    modern(Client(), "/mcp", token_a, "tools/call", {"name": "ask", "arguments": {}})
    session_id = initialize(Client(), "/mcp", token_a)
    OrganizationMembership.objects.get(organization=a, user=user).delete()

    response = modern(Client(), "/mcp", token_a, "tasks/get", {"taskId": task_id})
    assert response.status_code == 401 and 'error="invalid_token"' in response["WWW-Authenticate"]
    task = McpTask.objects.get(task_id=task_id)
    assert task.status == McpTask.Status.CANCELLED
    assert Elicitation.objects.get().status == Elicitation.Status.EXPIRED  # a form: no one to tell
    assert McpSession.objects.get(pk=session_id).ended_at is not None
    assert structured(modern(Client(), "/mcp", token_b, "tools/call", {"name": "who"}))["organization"] == "globex"


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_a_disabled_tool_is_answered_as_an_unknown_one(two, tokens, era):
    a, _ = two
    a.enabled_tools = ["who"]
    a.save()
    token_a, token_b = tokens

    def call(token: str, name: str):
        params = {"name": name, "arguments": {"text": "hi"} if name == "echo" else {}}
        if era == "modern":
            return modern(Client(), "/mcp", token, "tools/call", params)
        return legacy(Client(), "/mcp", token, initialize(Client(), "/mcp", token), "tools/call", params)

    def listed(token: str) -> list[str]:
        if era == "modern":
            response = modern(Client(), "/mcp", token, "tools/list")
        else:
            response = legacy(Client(), "/mcp", token, initialize(Client(), "/mcp", token), "tools/list")
        return [tool["name"] for tool in response.json()["result"]["tools"]]

    assert listed(token_a) == ["who"]
    assert listed(token_b) == ["who", "echo", "ask", "slow", "confirm"]
    disabled, unknown = call(token_a, "echo"), call(token_a, "ech0")
    assert disabled.status_code == unknown.status_code
    assert disabled.json()["error"] == {**unknown.json()["error"], "message": "Unknown tool: echo"}
    assert unknown.json()["error"]["message"] == "Unknown tool: ech0"
    assert call(token_b, "echo").json()["result"]["content"] == [{"type": "text", "text": "hi"}]
