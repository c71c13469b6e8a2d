"""A token whose user, client or row is gone is a 401 ``invalid_token``, never a 500, in both eras.

The bearer check may pass on a cached lookup while the user or client is deleted by another
process (the bound of ``REVOCATION_CHECK_SECONDS`` with a per-process cache, or the race between
the check and the first write with any cache). :func:`stale_principal` reproduces that window
in one process: the change is made, then this process's cache is put back as a process that has
not heard of it yet would have it. Every path that then writes or reads a row keyed to the
principal answers 401: initialize (the session's foreign key), session requests, the GET stream
and DELETE (the session went with the user), task creation (the task's foreign key), task polls (the
task went with the user), and a tool that stores a URL elicitation (its foreign key).

Run on SQLite and on PostgreSQL (``DATABASE_URL=postgres://…``).
"""

from __future__ import annotations

import json
import time

import pytest
from asgiref.sync import async_to_sync
from django.core.cache import cache
from django.test import AsyncClient, Client
from oauth2_provider.models import get_access_token_model

from mcp_oauth.models import McpSession, McpTask
from mcp_oauth.resource_server.cache import TOKEN_PREFIX, access_token_by_checksum, token_checksum
from mcp_oauth.resource_server.revocation import watch
from tests.mcp_oauth.mcp_server.mcp_tasks.test_runner import TASK_CAPS
from tests.mcp_oauth.mcp_server.mcp_tasks.test_runner import post as modern_post

pytestmark = pytest.mark.django_db(transaction=True)

ACCEPT_BOTH = "application/json, text/event-stream"
OLD = "2025-11-25"


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "BASE_URL": "https://testserver",
        "TOOL_REGISTRY": "tests.mcp_oauth.mcp_server.mcp_tasks.test_runner.REGISTRY",
        "TASKS_EXECUTOR": "thread",
        "REVOCATION_CHECK_SECONDS": 3600,  # this process does not re-read the stamp in the test
    }


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, resource=resource.uri)


def stale_principal(token: str, change) -> None:
    """Run ``change()`` (a deletion), then leave this process's token cache and revocation watch
    as a process that has not yet heard of it has them."""
    checksum = token_checksum(token)
    cached = access_token_by_checksum(checksum)
    assert cached is not None
    known, config = watch.version, watch.config_version
    change()
    cache.set(TOKEN_PREFIX + checksum, cached, timeout=300)
    watch.version, watch.config_version, watch.checked_at = known, config, time.monotonic()


def old_post(client, token, message, session=None):
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT_BOTH}
    if message.get("method") != "initialize":
        headers["MCP-Protocol-Version"] = OLD
    if session:
        headers["Mcp-Session-Id"] = session
    return client.post("/mcp", json.dumps(message), content_type="application/json", headers=headers)


def initialize(client, token):
    return old_post(
        client,
        token,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": OLD, "capabilities": {}, "clientInfo": {"name": "gone", "version": "1"}},
        },
    )


def assert_invalid_token(response) -> None:
    assert response.status_code == 401, (response.status_code, response.content)
    assert 'error="invalid_token"' in response["WWW-Authenticate"]


def delete_user(user, public_app):
    return user.delete


def delete_client(user, public_app):
    return public_app.delete


def revoke_token(user, public_app):
    return lambda: get_access_token_model().objects.filter(user=user).delete()


CHANGES = [delete_user, delete_client]


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c.__name__)
def test_initialize_with_a_vanished_principal_is_401_not_500(token, user, public_app, change):
    stale_principal(token, change(user, public_app))
    assert_invalid_token(initialize(Client(), token))
    assert not McpSession.objects.exists()
    # this process now knows: the next request is refused by the bearer check itself
    assert_invalid_token(initialize(Client(), token))


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c.__name__)
def test_session_request_with_a_vanished_principal_is_401(token, user, public_app, change):
    client = Client()
    response = initialize(client, token)
    assert response.status_code == 200
    session = response["Mcp-Session-Id"]
    stale_principal(token, change(user, public_app))
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    assert_invalid_token(old_post(client, token, call, session=session))


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c.__name__)
def test_session_notification_with_a_vanished_principal_is_401(token, user, public_app, change):
    response = initialize(Client(), token)
    session = response["Mcp-Session-Id"]
    stale_principal(token, change(user, public_app))
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert_invalid_token(old_post(Client(), token, note, session=session))


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c.__name__)
def test_get_stream_with_a_vanished_principal_is_401(token, user, public_app, change):
    session = initialize(Client(), token)["Mcp-Session-Id"]
    stale_principal(token, change(user, public_app))
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "text/event-stream",
        "MCP-Protocol-Version": OLD,
        "Mcp-Session-Id": session,
    }
    assert_invalid_token(async_to_sync(AsyncClient().get)("/mcp", headers=headers))


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c.__name__)
def test_delete_session_with_a_vanished_principal_is_401(token, user, public_app, change):
    response = initialize(Client(), token)
    session = response["Mcp-Session-Id"]
    stale_principal(token, change(user, public_app))
    got = Client().delete(
        "/mcp",
        headers={"Authorization": f"Bearer {token}", "MCP-Protocol-Version": OLD, "Mcp-Session-Id": session},
    )
    assert_invalid_token(got)


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c.__name__)
def test_task_creation_with_a_vanished_principal_is_401_not_500(token, user, public_app, change):
    stale_principal(token, change(user, public_app))
    response = modern_post(Client(), token, "tools/call", {"name": "compute", "arguments": {"label": "x"}})
    assert_invalid_token(response)
    assert not McpTask.objects.exists()


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c.__name__)
def test_task_poll_with_a_vanished_principal_is_401(token, user, public_app, change):
    created = modern_post(Client(), token, "tools/call", {"name": "compute", "arguments": {"label": "y"}})
    assert created.status_code == 200, created.content
    task_id = created.json()["result"]["taskId"]
    stale_principal(token, change(user, public_app))
    response = modern_post(Client(), token, "tasks/get", {"taskId": task_id})
    assert_invalid_token(response)


def test_a_principal_that_stands_keeps_its_404(token):
    """The check runs only when something failed, and changes nothing for a live token."""
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    response = old_post(Client(), token, call, session="unknown-session")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32600
    assert TASK_CAPS  # the tasks extension is what the modern calls above declare


@pytest.mark.parametrize("change", CHANGES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("tool", ["set_api_key"])
def test_an_elicitation_for_a_vanished_principal_is_401_not_500(token, user, public_app, change, tool, settings):
    """A URL elicitation stores a row keyed to the user (elicitation.service): the tool that
    asks for one with a token whose user or client is gone."""
    from cryptography.fernet import Fernet

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_REGISTRY": "mcp_oauth.mcp_server.tools.registry"}
    settings.ELICITATION = {"ENCRYPTION_KEYS": [Fernet.generate_key().decode()]}
    caps = {"elicitation": {"form": {}, "url": {}}}
    stale_principal(token, change(user, public_app))
    response = modern_post(Client(), token, "tools/call", {"name": tool, "arguments": {}}, caps=caps)
    assert_invalid_token(response)
