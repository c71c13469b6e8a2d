"""Django models as MCP resources (mcp_oauth.mcp_server.registry.model_resources): no reverse relation as the lookup, rows reach only their owner, file fields and their size limit."""

from __future__ import annotations

import json

import pytest
from django.core.files.base import ContentFile

from mcp_oauth.mcp_server.registry import ModelResource
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


def test_a_reverse_relation_cannot_be_the_lookup(django_user_model):
    with pytest.raises(ValueError, match="lookup 'notes' is a reverse relation, not a field"):
        ModelResource(
            "owners://{notes}",
            model=django_user_model,
            queryset=lambda ctx: django_user_model.objects.all(),
            lookup="notes",
        )


def test_model_rows_reach_only_their_owner(notes_registry, alice_token, bob_token, user, other_user):
    mine = Note.objects.create(owner=user, title="mine", body="alice's")
    theirs = Note.objects.create(owner=other_user, title="theirs", body="bob's")
    alice = Session(alice_token)
    assert [r["uri"] for r in alice.result("resources/list")["resources"]] == [f"mynotes://{mine.pk}"]
    assert (
        json.loads(alice.result("resources/read", {"uri": f"mynotes://{mine.pk}"})["contents"][0]["text"])["body"]
        == "alice's"
    )
    missing = alice.error("resources/read", {"uri": "mynotes://99999"})
    hidden = alice.error("resources/read", {"uri": f"mynotes://{theirs.pk}"})
    assert hidden == {
        **missing,
        "message": missing["message"].replace("99999", str(theirs.pk)),
        "data": {"uri": f"mynotes://{theirs.pk}"},
    }
    assert hidden["code"] == -32602
    completion = alice.result(
        "completion/complete",
        {"ref": {"type": "ref/resource", "uri": "mynotes://{pk}"}, "argument": {"name": "pk", "value": ""}},
    )
    assert completion["completion"]["values"] == [str(mine.pk)]
    error = alice.error("resources/subscribe", {"uri": f"mynotes://{theirs.pk}"})
    assert error["message"] == f"Resource not found: mynotes://{theirs.pk}"
    assert not ResourceSubscription.objects.exists()


def test_file_field_blobs_and_their_size_limit(notes_registry, alice_token, user):
    small = Note.objects.create(owner=user, title="s")
    small.attachment.save("s.png", ContentFile(b"\x89PNG"), save=True)
    big = Note.objects.create(owner=user, title="b")
    big.attachment.save("b.bin", ContentFile(b"0123456789"), save=True)
    empty = Note.objects.create(owner=user, title="e")
    session = Session(alice_token)
    blob = session.result("resources/read", {"uri": f"myfiles://{small.pk}"})["contents"][0]
    assert blob == {"uri": f"myfiles://{small.pk}", "mimeType": "image/png", "blob": "iVBORw=="}
    error = session.error("resources/read", {"uri": f"myfiles://{big.pk}"})
    assert error["message"] == f"Resource too large: myfiles://{big.pk} is 10 bytes, the limit is 8 bytes"
    error = session.error("resources/read", {"uri": f"myfiles://{empty.pk}"})
    assert error["message"] == f"Resource not found: myfiles://{empty.pk}"
