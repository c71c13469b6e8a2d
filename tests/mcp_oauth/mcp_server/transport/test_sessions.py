"""MCP sessions (mcp_oauth.mcp_server.transport.sessions): the session header, identical 404s for unknown, ended, expired and foreign sessions, DELETE, the outbox."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import get_application_model

from mcp_oauth.mcp_server.transport.sessions import enqueue_session_message, forget_session
from mcp_oauth.models import McpSession, McpSessionEvent
from mcp_oauth.signals import mcp_session_ended
from tests.mcp_oauth.mcp_server.transport.test_views import (  # noqa: F401 - fixtures
    ACCEPT_BOTH,
    INIT_PARAMS,
    _registry,
    client,
    error_of,
    initialize,
    mcp_headers,
    post,
    request,
    result_of,
    token,
)


def test_requests_other_than_initialize_need_the_session_header(client, token):
    initialize(client, token)
    for message in (request("ping"), request("tools/list"), {"jsonrpc": "2.0", "method": "notifications/initialized"}):
        response = post(client, message, token)
        assert response.status_code == 400
        assert error_of(response)["code"] == -32600


def _not_found(response) -> bytes:
    assert response.status_code == 404, response.content
    return response.content


def test_unknown_ended_expired_and_foreign_sessions_are_identical_404s(
    client, token, resource, user, other_user, public_app, mint_token, settings
):
    def ping(session_id, with_token=token):
        return post(client, request("ping"), with_token, session_id)

    answers = set()
    answers.add(_not_found(ping("no-such-session")))
    answers.add(_not_found(ping("../../etc/passwd")))
    answers.add(_not_found(ping("x" * 500)))

    # another user's token (same client), another client's token (same user)
    session_id = initialize(client, token)
    other_user_token = mint_token(other_user, public_app, resource=resource.uri)
    answers.add(_not_found(ping(session_id, other_user_token)))
    other_app = get_application_model().objects.create(
        name="Other",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/cb",
    )
    answers.add(_not_found(ping(session_id, mint_token(user, other_app, resource=resource.uri))))
    assert result_of(ping(session_id)) == {}

    # idle-expired
    McpSession.objects.filter(pk=session_id).update(last_seen_at=timezone.now() - timedelta(days=2))
    forget_session(session_id)  # a bulk update sends no signal (the session cache's documented contract)
    answers.add(_not_found(ping(session_id)))

    # ended
    ended = initialize(client, token)
    McpSession.objects.filter(pk=ended).update(ended_at=timezone.now())
    answers.add(_not_found(ping(ended)))
    assert len(answers) == 1, f"every 404 must look the same: {answers}"


def test_a_used_session_stays_alive(client, token, settings):
    session_id = initialize(client, token)
    old = timezone.now() - timedelta(hours=23)
    McpSession.objects.filter(pk=session_id).update(last_seen_at=old)
    assert result_of(post(client, request("ping"), token, session_id)) == {}
    assert McpSession.objects.get(pk=session_id).last_seen_at > old


def test_delete_ends_the_session(client, token):
    session_id = initialize(client, token)
    ended = []
    mcp_session_ended.connect(lambda **kw: ended.append(kw["session"].pk), weak=False, dispatch_uid="t-end")
    try:
        response = client.delete("/mcp", headers=mcp_headers(token, session_id))
    finally:
        mcp_session_ended.disconnect(dispatch_uid="t-end")
    assert response.status_code == 204
    assert ended == [session_id]
    assert McpSession.objects.get(pk=session_id).ended_at is not None
    _not_found(post(client, request("ping"), token, session_id))
    _not_found(client.delete("/mcp", headers=mcp_headers(token, session_id)))


def test_delete_needs_the_session_header_and_the_owner(client, token, resource, other_user, public_app, mint_token):
    session_id = initialize(client, token)
    assert client.delete("/mcp", headers=mcp_headers(token)).status_code == 400
    intruder = mint_token(other_user, public_app, resource=resource.uri)
    _not_found(client.delete("/mcp", headers=mcp_headers(intruder, session_id)))
    assert McpSession.objects.get(pk=session_id).ended_at is None


def test_enqueue_session_message_validation(client, token):
    session_id = initialize(client, token)
    with pytest.raises(ValueError):
        enqueue_session_message(session_id, {"jsonrpc": "2.0", "id": 1, "result": {}})
    with pytest.raises(ValueError):
        enqueue_session_message(session_id, {"params": {}})
    with pytest.raises(ValueError):
        enqueue_session_message(session_id, {"method": "x", "params": [1]})
    with pytest.raises(McpSession.DoesNotExist):
        enqueue_session_message("nope", {"method": "notifications/x"})
    McpSession.objects.filter(pk=session_id).update(ended_at=timezone.now())
    with pytest.raises(McpSession.DoesNotExist):
        enqueue_session_message(session_id, {"method": "notifications/x"})


def test_enqueue_session_message_to_a_loaded_session_checks_that_row(client, token):
    """Given the row the caller loaded, liveness is judged on it (ended, idle) like ``live()``."""
    session = McpSession.objects.get(pk=initialize(client, token))
    assert session.is_live
    event = enqueue_session_message(session, {"method": "notifications/x"})
    assert event.session_id == session.pk and event.message == {"jsonrpc": "2.0", "method": "notifications/x"}
    from mcp_oauth.settings import mcp_oauth_settings

    session.last_seen_at = timezone.now() - timedelta(seconds=mcp_oauth_settings.SESSION_IDLE_TIMEOUT_SECONDS + 60)
    assert not session.is_live
    with pytest.raises(McpSession.DoesNotExist):
        enqueue_session_message(session, {"method": "notifications/x"})
    session.last_seen_at, session.ended_at = timezone.now(), timezone.now()
    with pytest.raises(McpSession.DoesNotExist):
        enqueue_session_message(session, {"method": "notifications/x"})
    assert McpSessionEvent.objects.filter(session=session).count() == 1
