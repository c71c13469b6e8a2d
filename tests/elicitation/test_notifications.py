"""notifications/elicitation/complete (elicitation.notifications, sent by the Celery task): once, never to an ended session, never for form elicitations."""

from __future__ import annotations

import pytest

from elicitation.models import Elicitation
from elicitation.tasks import notify_elicitation_complete
from mcp_oauth.mcp_server.transport.sessions import end_session
from tests.elicitation.test_service import (  # noqa: F401 - fixtures
    COMPLETE,
    _url_elicitation_site,
    completion,
    connect_request,
    provider,
    session,
)
from tests.support.elicitation_helpers import (
    outbox,
    refresh,
)


@pytest.mark.django_db
def test_notify_elicitation_complete_sends_once(user, provider, session):
    row = connect_request(user, session)
    assert notify_elicitation_complete(row.pk) == "not-finished"
    Elicitation.objects.filter(pk=row.pk).update(status="completed")
    assert notify_elicitation_complete(row.pk) == "sent"
    assert notify_elicitation_complete(row.pk) == "already-sent"
    assert outbox(session) == [completion(row)]
    assert refresh(row).notified_at is not None
    assert notify_elicitation_complete(10**9) == "not-finished"


@pytest.mark.django_db
def test_notify_elicitation_complete_skips_an_ended_session(user, provider, session):
    row = connect_request(user, session)
    Elicitation.objects.filter(pk=row.pk).update(status="completed")
    end_session(session)
    assert notify_elicitation_complete(row.pk) == "no-session"
    assert refresh(row).notified_at is None and outbox(session) == []
    Elicitation.objects.filter(pk=row.pk).update(session=None)
    assert notify_elicitation_complete(row.pk) == "no-session"


@pytest.mark.django_db
def test_notify_elicitation_complete_ignores_form_elicitations(user, session):
    row = Elicitation.objects.create(message="Name?", user=user, session=session, status="accepted")
    assert notify_elicitation_complete(row.pk) == "not-finished" and outbox(session) == []
