"""Resource notifications through session outboxes (mcp_oauth.mcp_server.registry.notify): they follow the row, never reach another user, admin edits notify the owner, subscriptions per session are bounded."""

from __future__ import annotations

import pytest
from django.test import Client

from mcp_oauth.models import ResourceSubscription
from project.models import Note
from tests.mcp_oauth.mcp_server.registry.test_handlers import (  # noqa: F401 - fixtures
    HEADERS,
    Session,
    alice_token,
    bob_token,
    notes_registry,
    registries,
)

pytestmark = pytest.mark.django_db(transaction=True)


def methods(messages: list[dict]) -> list[tuple[str, str | None]]:
    return [(m["method"], (m.get("params") or {}).get("uri")) for m in messages]


def test_notifications_follow_the_row_and_never_reach_another_user(
    notes_registry, alice_token, bob_token, user, other_user
):
    note = Note.objects.create(owner=user, title="plan", body="v1")
    uri = f"mynotes://{note.pk}"
    alice, alice_other_client, bob = Session(alice_token), Session(alice_token), Session(bob_token)
    assert alice.result("resources/subscribe", {"uri": uri}) == {}
    assert alice.result("resources/subscribe", {"uri": uri}) == {}  # idempotent
    assert ResourceSubscription.objects.filter(session_id=alice.id, uri=uri).count() == 1

    note.body = "v2"
    note.save()
    assert methods(alice.outbox()) == [
        ("notifications/resources/updated", uri),
        ("notifications/resources/list_changed", None),
    ]
    assert methods(alice_other_client.outbox()) == [("notifications/resources/list_changed", None)]  # not subscribed
    assert bob.outbox() == []

    # Ownership moves to Bob: Alice's subscription no longer reaches her, Bob learns of a new row.
    note.owner = other_user
    note.save()
    assert methods(alice.outbox())[2:] == [("notifications/resources/list_changed", None)]  # no "updated"
    assert methods(bob.outbox()) == [("notifications/resources/list_changed", None)]

    note.owner = user
    note.save()
    assert methods(bob.outbox())[1:] == [("notifications/resources/list_changed", None)]  # it left Bob's list
    note.delete()
    assert methods(alice.outbox())[-2:] == [
        ("notifications/resources/updated", uri),
        ("notifications/resources/list_changed", None),
    ]
    assert len(bob.outbox()) == 2

    assert alice.result("resources/unsubscribe", {"uri": uri}) == {}
    assert not ResourceSubscription.objects.filter(session_id=alice.id).exists()


def test_an_admin_edit_notifies_the_owner_session(notes_registry, alice_token, bob_token, user, django_user_model):
    note = Note.objects.create(owner=user, title="plan", body="v1")
    alice, bob = Session(alice_token), Session(bob_token)
    alice.result("resources/subscribe", {"uri": f"mynotes://{note.pk}"})
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    browser = Client()
    browser.force_login(admin)
    response = browser.post(
        f"/admin/project/note/{note.pk}/change/",
        {"owner": user.pk, "title": "plan", "body": "edited in the admin", "attachment": ""},
    )
    assert response.status_code == 302, response.content[:500]
    assert ("notifications/resources/updated", f"mynotes://{note.pk}") in methods(alice.outbox())
    assert bob.outbox() == []


def test_subscriptions_per_session_are_bounded(registries, alice_token, settings):
    resources, _ = registries
    resources.register_template(lambda ctx, id: "x", "rows://{id}", name="rows")
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "MAX_SUBSCRIPTIONS_PER_SESSION": 2}
    session = Session(alice_token)
    session.result("resources/subscribe", {"uri": "rows://1"})
    session.result("resources/subscribe", {"uri": "rows://2"})
    session.result("resources/subscribe", {"uri": "rows://2"})
    error = session.error("resources/subscribe", {"uri": "rows://3"})
    assert (error["code"], error["message"]) == (-32602, "Too many subscriptions: a session may hold 2")
