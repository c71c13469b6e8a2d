"""The tool-facing elicitation API (elicitation.api): -32042 through the MCP endpoint, elicit_url, require_connection and require_secret, and clients without URL mode."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from elicitation.api import ElicitationError, ElicitationUnsupported
from elicitation.models import Elicitation
from elicitation.url_mode import (
    UrlElicitationRequired,
    UrlElicitationUnsupported,
    UrlResult,
    complete_elicitation,
    elicit_url,
    require_connection,
    require_secret,
)
from mcp_oauth.mcp_server.tools import ToolError
from mcp_oauth.models import McpSession
from tests.elicitation.test_service import (  # noqa: F401 - fixtures
    MCP_HEADERS,
    PROVIDER_NAME,
    ScriptedContext,
    _no_sink,
    _url_elicitation_site,
    answer,
    browser,
    mcp_initialize,
    mcp_post,
    provider,
    session,
    tool_context,
    unsupported_text,
)
from tests.support.elicitation_helpers import (
    FORM_CAPS,
    SITE,
    URL_CAPS,
    open_session,
    outbox,
    path_of,
)


def call_demo_profile(client: Client, token: str, session_id: str) -> dict:
    response = mcp_post(
        client,
        token,
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "demo_profile", "arguments": {}}},
        session_id,
    )
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.django_db
def test_tool_call_without_connection_ends_with_32042_and_one_link(user, public_app, resource, provider, mint_token):
    client, token = Client(), mint_token(user, public_app, resource=resource.uri)
    session_id = mcp_initialize(client, token, URL_CAPS)
    body = call_demo_profile(client, token, session_id)
    assert set(body) == {"jsonrpc", "id", "error"} and body["id"] == 5
    error = body["error"]
    assert error["code"] == -32042
    assert error["message"] == "This request requires more information."
    row = Elicitation.objects.get()
    assert error["data"] == {
        "elicitations": [
            {
                "mode": "url",
                "elicitationId": row.elicitation_id,
                "url": f"{SITE}/elicitation/{row.elicitation_id}/",
                "message": f"Connect your {PROVIDER_NAME} account to continue.",
            }
        ]
    }
    assert (row.status, row.kind, row.user, row.session_id) == ("pending", "connect", user, session_id)
    assert (row.provider.slug, row.scopes, row.request_id) == ("demo", "profile", "5")


@pytest.mark.django_db
@pytest.mark.parametrize("capabilities", [{"elicitation": {}}, FORM_CAPS, {}, {"sampling": {}}])
def test_tool_call_from_a_client_without_url_mode_gets_a_tool_error_naming_the_connections_page(
    user, public_app, resource, provider, mint_token, capabilities
):
    client, token = Client(), mint_token(user, public_app, resource=resource.uri)
    session_id = mcp_initialize(client, token, capabilities)
    body = call_demo_profile(client, token, session_id)
    assert "error" not in body
    assert body["result"]["isError"] is True
    assert body["result"]["content"] == [
        {"type": "text", "text": unsupported_text(f"This tool needs your {PROVIDER_NAME} account connected.")}
    ]
    assert not Elicitation.objects.exists()


@pytest.mark.django_db
def test_require_secret_asks_then_returns_the_stored_value(user, session):
    ctx = tool_context(session)
    with pytest.raises(UrlElicitationRequired) as caught:
        async_to_sync(require_secret)(ctx, "demo_api_key", "Enter your Demo API key.")
    row = Elicitation.objects.get()
    assert caught.value.code == -32042
    assert caught.value.data == {
        "elicitations": [
            {"mode": "url", "elicitationId": row.elicitation_id, "url": row.url, "message": "Enter your Demo API key."}
        ]
    }
    assert (row.kind, row.secret_name, row.request_id, row.session_id) == ("secret", "demo_api_key", "11", session.pk)
    assert browser(user).post(path_of(row), {"action": "save", "value": " sk-test-42 "}).status_code == 200
    assert async_to_sync(require_secret)(ctx, "demo_api_key", "Enter your Demo API key.") == "sk-test-42"
    assert Elicitation.objects.count() == 1


@pytest.mark.django_db
def test_require_secret_without_url_mode_is_a_tool_error(user, public_app, resource):
    ctx = tool_context(open_session(user, public_app, resource, FORM_CAPS))
    with pytest.raises(UrlElicitationUnsupported) as caught:
        async_to_sync(require_secret)(ctx, "demo_api_key", "Enter it.")
    assert str(caught.value) == unsupported_text("This tool needs a value you must type on this site's secure page.")
    # nothing for the client; the request waits on the user's connections page, bound to no session
    row = Elicitation.objects.get()
    assert (row.mode, row.kind, row.secret_name, row.status, row.session_id) == (
        "url",
        "secret",
        "demo_api_key",
        "pending",
        None,
    )
    with pytest.raises(UrlElicitationUnsupported):
        async_to_sync(require_secret)(ctx, "demo_api_key", "Enter it.")
    assert Elicitation.objects.count() == 1  # asked again: the same waiting request
    page = browser(user).get("/elicitation/connections/").content.decode()
    assert f'href="/elicitation/{row.elicitation_id}/"' in page and "Enter it." in page
    assert browser(user).post(path_of(row), {"action": "save", "value": "sk-9"}).status_code == 200
    assert async_to_sync(require_secret)(ctx, "demo_api_key", "Enter it.") == "sk-9"
    row.refresh_from_db()
    assert row.status == "completed"
    from elicitation.tasks import notify_elicitation_complete

    assert notify_elicitation_complete(row.pk) == "no-session"  # bound to no session: nothing is sent anywhere


@pytest.mark.django_db
def test_elicit_url_sends_the_link_during_the_call(user, provider, session):
    ctx = tool_context(session, answer={"action": "accept"})
    result = async_to_sync(elicit_url)(ctx, "Connect Demo.", kind="connect", provider="demo", wait_seconds=None)
    row = Elicitation.objects.get()
    assert result == UrlResult("accept", False, result.elicitation) and result.elicitation.pk == row.pk
    assert ctx.sent == [
        {
            "method": "elicitation/create",
            "id": f"elicitation-{row.elicitation_id}",
            "params": {"mode": "url", "elicitationId": row.elicitation_id, "url": row.url, "message": "Connect Demo."},
        }
    ]
    assert (row.status, row.request_id) == ("pending", "11")


@pytest.mark.django_db
def test_elicit_url_waits_until_the_page_completes(user, session):
    async def user_saves_on_the_page():
        from asgiref.sync import sync_to_async

        row = await Elicitation.objects.aget()
        await sync_to_async(complete_elicitation)(row.elicitation_id)

    ctx = tool_context(session, answer={"action": "accept"}, during=user_saves_on_the_page)
    result = async_to_sync(elicit_url)(ctx, "Pay.", kind="external", target_url="https://pay.example/", wait_seconds=5)
    assert (result.action, result.completed, result.elicitation.status) == ("accept", True, "completed")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("client_answer", "status"), [({"action": "decline"}, "declined"), ({"action": "cancel"}, "cancelled")]
)
def test_elicit_url_decline_or_cancel_finishes_the_row(user, session, client_answer, status):
    ctx = tool_context(session, answer=client_answer)
    result = async_to_sync(elicit_url)(ctx, "Key?", kind="secret", secret_name="k")
    assert (result.action, result.completed) == (client_answer["action"], False)
    assert Elicitation.objects.get().status == status and outbox(session) == []


@pytest.mark.django_db
def test_elicit_url_malformed_answer_is_an_error(user, session):
    ctx = tool_context(session, answer={"action": "maybe"})
    with pytest.raises(ElicitationError):
        async_to_sync(elicit_url)(ctx, "Key?", kind="secret", secret_name="k")
    assert Elicitation.objects.get().status == "cancelled"


@pytest.mark.django_db
def test_elicit_url_refuses_clients_without_url_mode_or_a_stream(user, public_app, resource):
    ctx = tool_context(open_session(user, public_app, resource, FORM_CAPS), answer={"action": "accept"})
    with pytest.raises(UrlElicitationUnsupported):
        async_to_sync(elicit_url)(ctx, "Go?", kind="external", target_url="https://pay.example/1")
    assert not Elicitation.objects.exists()  # nothing sent, nothing created
    with pytest.raises(UrlElicitationUnsupported):
        async_to_sync(elicit_url)(ctx, "Key?", kind="secret", secret_name="k")
    assert ctx.sent == []  # a secret request waits on the connections page instead, bound to no session
    assert list(Elicitation.objects.values_list("kind", "session_id")) == [("secret", None)]
    ctx = tool_context(open_session(user, public_app, resource), answer={"action": "accept"}, streaming=False)
    with pytest.raises(ElicitationUnsupported, match="cannot carry one"):
        async_to_sync(elicit_url)(ctx, "Key?", kind="secret", secret_name="k2")
    assert Elicitation.objects.count() == 1


@pytest.mark.django_db
def test_require_connection_without_a_connection_raises_32042(user, provider, session):
    ctx = tool_context(session)
    with pytest.raises(UrlElicitationRequired) as caught:
        async_to_sync(require_connection)(ctx, "demo", ["profile", "extra"], message="Link Demo please.")
    row = Elicitation.objects.get()
    assert caught.value.code == -32042 and caught.value.data["elicitations"][0]["message"] == "Link Demo please."
    assert (row.kind, row.scopes, row.session_id) == ("connect", "profile extra", session.pk)
    with pytest.raises(ToolError) as unknown:
        async_to_sync(require_connection)(ctx, "nope")
    assert str(unknown.value) == "This site has no enabled third-party provider 'nope'; ask its administrators."


@pytest.mark.django_db
def test_require_connection_needs_a_user(public_app, resource, provider):
    from mcp_oauth.mcp_server.tools import ToolError

    session = McpSession.objects.create(
        user=None,
        application=public_app,
        resource=resource,
        protocol_version="2025-11-25",
        client_capabilities=URL_CAPS,
    )
    with pytest.raises(ToolError, match="signed-in user"):
        async_to_sync(require_connection)(tool_context(session), "demo")
    assert not Elicitation.objects.exists()
