"""Migration 0016_session_lengths: sessions that existed before it start with their family's oldest
stored generation (the cap is not restarted at the upgrade)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("mcp_oauth", "0014_fleet_secrets")]
AFTER = [("mcp_oauth", "0016_session_lengths")]


def test_existing_sessions_start_with_their_oldest_generation():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old_apps = executor.loader.project_state(BEFORE).apps
    Generation = old_apps.get_model("mcp_oauth", "RefreshGeneration")
    now = timezone.now()
    family_a, family_b = uuid.uuid4(), uuid.uuid4()
    a1 = Generation.objects.create(token_family=family_a, created_at=now - timedelta(days=40))
    a2 = Generation.objects.create(token_family=family_a, parent=a1, created_at=now - timedelta(days=1))
    b1 = Generation.objects.create(token_family=family_b, created_at=now - timedelta(days=5))
    lone = Generation.objects.create(token_family=None, created_at=now - timedelta(days=7))
    try:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(AFTER)
        new_apps = executor.loader.project_state(AFTER).apps
        started = dict(
            new_apps.get_model("mcp_oauth", "RefreshGeneration").objects.values_list("pk", "session_started_at")
        )
        assert started[a1.pk] == started[a2.pk] == a1.created_at
        assert started[b1.pk] == b1.created_at
        assert started[lone.pk] == lone.created_at
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
