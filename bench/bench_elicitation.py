"""Benchmark: what URL-mode elicitation adds to a tool call and to the database.

Runs in one process against the reference project on a throw-away SQLite database (or
DATABASE_URL). Prints per-operation times and the ratio to a baseline measured in the same run:

  baseline         read one ThirdPartyConnection row by (user, provider) — the lookup any
                   connection check needs
  decrypt          Fernet decryption of one access token (crypto only)
  fresh_token      fresh_access_token(): row lock, decrypt, last_used update (token still valid)
  complete+notify  complete_elicitation() + notify task (eager): row lock, audit event,
                   outbox row, notified_at
  rotate (per row) manage.py rotate_elicitation_keys over N connections, divided by N

Usage:

    .venv/bin/python bench/bench_elicitation.py [--requests 500]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import measure, setup_django


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()

    from cryptography.fernet import Fernet

    old_key, new_key = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    os.environ["ELICITATION_ENCRYPTION_KEYS"] = old_key

    setup_django(test_environment=False)
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test.utils import override_settings
    from django.utils import timezone
    from oauth2_provider.models import get_application_model

    from elicitation import crypto
    from elicitation.models import Elicitation, ThirdPartyConnection, ThirdPartyProvider
    from elicitation.providers import fresh_access_token
    from elicitation.url_mode import complete_elicitation
    from mcp_oauth.models import McpSession
    from mcp_oauth.resource_server.default_resource import ensure_default_resource

    resource = ensure_default_resource()
    user = get_user_model().objects.create_user("bench", password="x")
    app = get_application_model().objects.create(
        name="bench",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/cb",
    )
    session = McpSession.objects.create(
        user=user,
        application=app,
        resource=resource,
        protocol_version="2025-11-25",
        client_capabilities={"elicitation": {"url": {}}},
        client_info={},
    )
    provider = ThirdPartyProvider(
        slug="bench",
        name="Bench",
        authorization_endpoint="https://as.example/authorize",
        token_endpoint="https://as.example/token",
        client_id="c",
    )
    provider.client_secret = "s" * 32
    provider.save()
    connection = ThirdPartyConnection(
        user=user, provider=provider, expires_at=timezone.now() + timedelta(days=1), scopes="profile"
    )
    connection.access_token = "at-" + "x" * 40
    connection.refresh_token = "rt-" + "y" * 40
    connection.save()
    ciphertext = connection.access_token_encrypted

    def complete_one():
        row = Elicitation.objects.create(
            mode="url",
            kind="external",
            message="m",
            target_url="https://pay.example/x",
            user=user,
            session=session,
            expires_at=timezone.now() + timedelta(minutes=10),
        )
        assert complete_elicitation(row.elicitation_id)

    n = args.requests
    results = {
        "baseline": measure(
            lambda: ThirdPartyConnection.objects.filter(user=user, provider=provider).first(), n, warmup=20
        ),
        "decrypt": measure(lambda: crypto.decrypt(ciphertext), n, warmup=20),
        "fresh_token": measure(lambda: fresh_access_token(connection), n, warmup=20),
        "complete+notify": measure(complete_one, n, warmup=20),
    }
    # rotation: N more users' connections, re-encrypted under a new key
    rows = 200
    for index in range(rows):
        other = get_user_model().objects.create_user(f"rot{index}", password="x")
        extra = ThirdPartyConnection(user=other, provider=provider, scopes="profile")
        extra.access_token = "at-" + "x" * 40
        extra.refresh_token = "rt-" + "y" * 40
        extra.save()
    total_rows = ThirdPartyConnection.objects.count() + ThirdPartyProvider.objects.count()
    with override_settings(ELICITATION={"ENCRYPTION_KEYS": [new_key, old_key]}):
        start = time.perf_counter()
        call_command("rotate_elicitation_keys", stdout=open(os.devnull, "w"))
        per_row = (time.perf_counter() - start) / total_rows
    results["rotate (per row)"] = [per_row]

    base = statistics.median(results["baseline"])
    print(f"{'operation':<18}{'median ms':>12}{'p95 ms':>10}{'x baseline':>12}")
    for name, samples in results.items():
        median = statistics.median(samples)
        p95 = sorted(samples)[max(0, int(len(samples) * 0.95) - 1)]
        print(f"{name:<18}{median * 1000:>12.3f}{p95 * 1000:>10.3f}{median / base:>12.2f}")
    print(
        f"(rotation: {total_rows} rows; outbox rows written: {session.events.count() if hasattr(session, 'events') else 'n/a'})"
    )


if __name__ == "__main__":
    main()
