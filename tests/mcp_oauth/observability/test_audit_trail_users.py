"""A user's tool calls in their data (mcp_oauth.observability.audit_trail_users): in their export, anonymised on erasure and when the account is deleted."""

from __future__ import annotations

import json

import pytest

from mcp_oauth.authorization_server.user_data.erasure import erase_user_data
from mcp_oauth.authorization_server.user_data.export import export_user_data
from mcp_oauth.models import ToolCallRecord, ToolCallUse
from mcp_oauth.observability.audit_trail_users import EXPORT_FIELDS
from tests.mcp_oauth.observability.test_audit_trail_export import (  # noqa: F401 - fixtures and helpers
    T0,
    row,
    rows,
)

pytestmark = pytest.mark.django_db


def test_a_users_export_has_their_tool_calls(rows, user):
    document = json.loads("".join(export_user_data(user).stream()))
    [mine] = document["sections"]["tool_calls"]
    assert list(mine) == list(EXPORT_FIELDS)
    assert (mine["tool"], mine["client_id"], mine["outcome"]) == ("echo", "client-a", "ok")


def test_erasure_anonymises_their_calls_and_deletes_their_last_use(rows, user, other_user):
    ToolCallRecord.objects.bulk_create([row(user=other_user, arguments={"a": 1})])
    ToolCallRecord.objects.filter(user=user).update(arguments={"secret": "mine"})
    ToolCallUse.objects.create(user=user, client_id="client-a", last_used_at=T0)
    ToolCallUse.objects.create(user=other_user, client_id="client-a", last_used_at=T0)
    counts = erase_user_data(user)
    assert (counts["tool_calls_anonymised"], counts["tool_call_uses"]) == (1, 1)
    erased = ToolCallRecord.objects.get(pk=rows[0].pk)
    assert (erased.user_id, erased.arguments, erased.arguments_digest) == (None, None, "")
    assert (erased.tool, erased.client_id, erased.outcome) == ("echo", "client-a", "ok")
    assert ToolCallRecord.objects.filter(user=other_user, arguments={"a": 1}).count() == 1
    assert list(ToolCallUse.objects.values_list("user_id", flat=True)) == [other_user.pk]


def test_deleting_the_account_erases_too(rows, user):
    pk = user.pk
    user.delete()
    assert ToolCallRecord.objects.filter(user_id=pk).count() == 0
    assert ToolCallRecord.objects.get(pk=rows[0].pk).arguments_digest == ""
