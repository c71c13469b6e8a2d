"""``TokenActor``: the row of an exchanged token (RFC 8693 §4.1 ``act``): ``__str__`` for a delegated
and a down-scoped token, one row per token checksum."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from mcp_oauth.models import TokenActor

pytestmark = pytest.mark.django_db

CHECKSUM = "a" * 64


def test_a_delegated_token_names_the_acting_client():
    actor = TokenActor.objects.create(
        token_checksum=CHECKSUM, act={"sub": "agent-7", "act": {"sub": "orchestrator"}}, subject_token_checksum="b" * 64
    )
    assert str(actor) == "delegated to client agent-7"
    actor.refresh_from_db()
    assert actor.act == {"sub": "agent-7", "act": {"sub": "orchestrator"}}
    assert actor.expires is None and actor.created_at is not None


@pytest.mark.parametrize("act", [None, {}, {"sub": ""}, ["agent-7"]])
def test_without_an_acting_subject_it_is_down_scoped(act):
    assert str(TokenActor(token_checksum=CHECKSUM, act=act)) == "down-scoped"


def test_one_row_per_token():
    TokenActor.objects.create(token_checksum=CHECKSUM, act=None)
    with pytest.raises(IntegrityError), transaction.atomic():
        TokenActor.objects.create(token_checksum=CHECKSUM, act={"sub": "x"})
    assert TokenActor.objects.get().act is None
