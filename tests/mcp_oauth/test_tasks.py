"""Celery tasks, run the way the embedded default runs them (task_always_eager)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from mcp_oauth.models import McpSession, McpSessionEvent, RedeemedAuthorizationCode
from mcp_oauth.tasks import cleanup

pytestmark = pytest.mark.django_db


def make_session(resource, user, app, **fields):
    return McpSession.objects.create(
        user=user, application=app, resource=resource, protocol_version="2025-11-25", **fields
    )


def test_cleanup_deletes_dead_sessions_and_old_codes(settings, resource, user, public_app):
    live = make_session(resource, user, public_app)
    ended = make_session(resource, user, public_app, ended_at=timezone.now())
    idle = make_session(resource, user, public_app, last_seen_at=timezone.now() - timedelta(days=2))
    McpSessionEvent.objects.create(session=idle, message={"jsonrpc": "2.0", "method": "x"})
    RedeemedAuthorizationCode.objects.create(
        code_checksum="a" * 64, application=public_app, redeemed_at=timezone.now() - timedelta(days=2)
    )
    fresh = RedeemedAuthorizationCode.objects.create(code_checksum="b" * 64, application=public_app)

    result = cleanup.delay().get()

    assert result == {
        "sessions": 2,
        "redeemed_codes": 1,
        "used_assertions": 0,
        "dpop_bindings": 0,
        "token_organizations": 0,
        "token_actors": 0,
        # the retention rules (mcp_oauth.retention): nothing old enough here
        "audit_events": 0,
        "audit_ips_cleared": 0,
        "tasks": 0,
        "cimd_documents": 0,
        "tool_calls": 0,
    }
    assert list(McpSession.objects.all()) == [live]
    assert not McpSessionEvent.objects.exists()
    assert list(RedeemedAuthorizationCode.objects.all()) == [fresh]
    assert ended.pk and idle.pk
