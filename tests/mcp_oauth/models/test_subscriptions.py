"""Resource subscriptions of 2025-11-25 sessions (mcp_oauth.models.subscriptions): one per session
and URI, gone with the session."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from mcp_oauth.models import McpSession
from mcp_oauth.models.subscriptions import ResourceSubscription

pytestmark = pytest.mark.django_db


@pytest.fixture
def session(user, public_app, resource):
    return McpSession.objects.create(
        user=user, application=public_app, resource=resource, protocol_version="2025-11-25", client_capabilities={}
    )


def test_one_subscription_per_session_and_uri(session):
    first = ResourceSubscription.objects.create(session=session, uri="notes://1")
    assert str(first) == f"notes://1 ({session.pk[:8]}…)"
    ResourceSubscription.objects.create(session=session, uri="notes://2")
    with pytest.raises(IntegrityError), transaction.atomic():
        ResourceSubscription.objects.create(session=session, uri="notes://1")
    assert sorted(session.resource_subscriptions.values_list("uri", flat=True)) == ["notes://1", "notes://2"]


def test_subscriptions_go_with_their_session(session):
    ResourceSubscription.objects.create(session=session, uri="notes://1")
    McpSession.objects.filter(pk=session.pk).delete()
    assert ResourceSubscription.objects.count() == 0
