"""The elicitation app's receivers of mcp_oauth signals (elicitation.signals.record_client_answer): the first answer of the asking session only, a second answer or one for a finished row ignored, the answer to a tool's request recorded whatever the row's status, none for a row whose tool stopped waiting."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from elicitation.models import Elicitation
from elicitation.signals import record_client_answer
from mcp_oauth.models import McpSession
from tests.elicitation.test_service import _url_elicitation_site, answer, connect_request, provider, session  # noqa: F401 - fixtures
from tests.support.elicitation_helpers import (
    open_session,
    refresh,
)


@pytest.mark.django_db
def test_record_client_answer_stores_the_first_answer_of_the_asking_session_only(
    user, public_app, resource, provider, session
):
    row = connect_request(user, session, request_id=3)
    other = open_session(user, public_app, resource)
    record_client_answer(sender=McpSession, session=other, message=answer(row, "accept"))
    assert refresh(row).client_answer is None
    record_client_answer(sender=McpSession, session=session, message={"jsonrpc": "2.0", "id": "srv-x", "result": {}})
    record_client_answer(sender=McpSession, session=session, message={"jsonrpc": "2.0", "id": 7, "result": {}})
    assert refresh(row).client_answer is None
    record_client_answer(sender=McpSession, session=session, message=answer(row, "accept"))
    record_client_answer(sender=McpSession, session=session, message=answer(row, "cancel"))
    row = refresh(row)
    assert row.client_answer == answer(row, "accept") and row.status == "pending"


@pytest.mark.django_db
def test_a_second_answer_does_not_finish_an_outbox_sent_elicitation(user, provider, session):
    row = connect_request(user, session, send=True)
    record_client_answer(sender=McpSession, session=session, message=answer(row, "accept"))
    record_client_answer(sender=McpSession, session=session, message=answer(row, "decline"))
    row = refresh(row)
    assert (row.status, row.client_answer) == ("pending", answer(row, "accept"))


@pytest.mark.django_db
def test_an_answer_for_a_finished_elicitation_is_ignored(user, provider, session):
    row = connect_request(user, session, send=True)
    Elicitation.objects.filter(pk=row.pk).update(status="completed")
    record_client_answer(sender=McpSession, session=session, message=answer(row, "decline"))
    row = refresh(row)
    assert (row.status, row.client_answer) == ("completed", None)


@pytest.mark.django_db
@pytest.mark.parametrize("status", ["completed", "cancelled", "expired", "declined"])
def test_the_answer_to_a_tool_s_request_is_recorded_whatever_the_row_s_status(user, provider, session, status):
    """The user may finish the page (on another worker) before the client's answer arrives: the
    asking tool still waits for that answer, so it is recorded; the status is left as it is."""
    row = connect_request(user, session, request_id=5)  # asked by a tool call
    Elicitation.objects.filter(pk=row.pk).update(status=status)
    record_client_answer(sender=McpSession, session=session, message=answer(row, "accept"))
    record_client_answer(sender=McpSession, session=session, message=answer(row, "decline"))
    row = refresh(row)
    assert (row.status, row.client_answer) == (status, answer(row, "accept"))
    assert row.client_answered_at is not None


@pytest.mark.django_db
def test_a_row_whose_tool_stopped_waiting_takes_no_answer(user, public_app, resource, provider, session):
    from elicitation.service import close_answer

    row = connect_request(user, session, request_id=5)
    async_to_sync(close_answer)(row.pk)
    record_client_answer(sender=McpSession, session=session, message=answer(row, "accept"))
    other = open_session(user, public_app, resource)
    fresh = connect_request(user, session, request_id=6)
    record_client_answer(sender=McpSession, session=other, message=answer(fresh, "accept"))
    assert (refresh(row).client_answer, refresh(fresh).client_answer, refresh(fresh).client_answered_at) == (
        None,
        None,
        None,
    )
