"""Which tokens are bound to which DPoP key (mcp_oauth.dpop.bindings): the cleanup prunes the bindings of expired tokens."""

from __future__ import annotations

from mcp_oauth.models import DPoPBinding
from mcp_oauth.resource_server.cache import token_checksum


def test_cleanup_prunes_the_bindings_of_expired_tokens(db):
    from datetime import timedelta

    from django.utils import timezone

    from mcp_oauth.dpop.bindings import bind_tokens
    from mcp_oauth.tasks import cleanup

    now = timezone.now()
    bind_tokens(
        "a" * 43,
        [("old", "access_token", now - timedelta(seconds=1)), ("live", "access_token", now + timedelta(hours=1))],
    )
    assert cleanup()["dpop_bindings"] == 1
    assert list(DPoPBinding.objects.values_list("token_checksum", flat=True)) == [token_checksum("live")]
