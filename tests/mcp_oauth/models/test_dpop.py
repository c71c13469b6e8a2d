"""DPoP key bindings of issued tokens (mcp_oauth.models.dpop, RFC 9449 §6): one row per token
checksum, found by thumbprint."""

from __future__ import annotations

import hashlib

import pytest
from django.db import IntegrityError, transaction

from mcp_oauth.models.dpop import DPoPBinding

pytestmark = pytest.mark.django_db

JKT = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"  # RFC 7638 §3.1's example thumbprint, 43 characters


def checksum(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def test_a_token_is_bound_once():
    binding = DPoPBinding.objects.create(
        token_checksum=checksum("at-1"), jkt=JKT, token_kind=DPoPBinding.Kind.ACCESS_TOKEN
    )
    assert str(binding) == f"access_token bound to {JKT}"
    assert binding.expires is None and binding.created_at is not None
    with pytest.raises(IntegrityError), transaction.atomic():
        DPoPBinding.objects.create(token_checksum=checksum("at-1"), jkt="another", token_kind="access_token")


def test_one_key_binds_many_tokens():
    for token, kind in [("at-1", "access_token"), ("at-2", "access_token"), ("rt-1", "refresh_token")]:
        DPoPBinding.objects.create(token_checksum=checksum(token), jkt=JKT, token_kind=kind)
    assert sorted(DPoPBinding.objects.filter(jkt=JKT).values_list("token_kind", flat=True)) == [
        "access_token",
        "access_token",
        "refresh_token",
    ]
    assert DPoPBinding.Kind.values == ["access_token", "refresh_token"]
