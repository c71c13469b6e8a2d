"""Benchmark: the resource registry over a model with many rows (the demo's ``notes://{pk}``).

Runs the registry's handlers (transport-independent, the same code the endpoint runs) in one
process against the reference project on a throw-away SQLite database (or DATABASE_URL), with
``--rows`` notes for the listing user and as many for another user. Prints per-operation times
and ratios to a baseline measured in the same run:

  baseline          Note.objects.filter(owner=user, pk=…).first() — the row lookup a read needs
  read              resources/read notes://<pk> (parse, scope check, per-user queryset, JSON)
  list first page   resources/list without cursor (static resources + first page of rows)
  list last page    resources/list with the cursor of the last page (SQL OFFSET/LIMIT: no
                    Python-side scan of earlier rows, so it stays near the first page)
  complete pk       completion/complete of notes://{pk} with value "1" (per-user SQL prefix match)
  save + notify     Note.save() with one subscribed session: visibility checks, outbox rows

Usage:

    .venv/bin/python bench/bench_resources.py [--rows 5000] [--requests 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import measure, setup_django


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()

    setup_django(test_environment=False)
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_application_model

    from mcp_oauth.mcp_server.registry.context import RequestContext
    from mcp_oauth.mcp_server.registry.handlers import handle
    from mcp_oauth.models import McpSession, ResourceSubscription
    from mcp_oauth.resource_server.default_resource import ensure_default_resource
    from project.models import Note

    resource = ensure_default_resource()
    User = get_user_model()
    user, other = User.objects.create_user("bench", password="x"), User.objects.create_user("other", password="x")
    Note.objects.bulk_create(
        [Note(owner=owner, title=f"note {i}", body="x" * 200) for owner in (user, other) for i in range(args.rows)]
    )
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
        client_capabilities={},
        client_info={},
    )
    ctx = RequestContext(
        user=user, scopes=frozenset({"mcp"}), resource=resource, session=session, protocol_version="2025-11-25"
    )
    target = Note.objects.filter(owner=user).order_by("pk")[args.rows // 2]
    ResourceSubscription.objects.create(session=session, uri=f"notes://{target.pk}")
    page_size = int(settings.MCP_OAUTH.get("RESOURCE_PAGE_SIZE", 50))

    loop = asyncio.new_event_loop()

    def run(method: str, params: dict):
        return loop.run_until_complete(handle(method, ctx, params))

    cursor = run("resources/list", {})["nextCursor"]
    pages = 1
    while True:
        page = run("resources/list", {"cursor": cursor})
        pages += 1
        if not page.get("nextCursor"):
            break
        cursor = page["nextCursor"]
    last_cursor = cursor

    def save():
        target.body = target.body[::-1]
        target.save()

    n = args.requests
    results = {
        "baseline": measure(lambda: Note.objects.filter(owner=user, pk=target.pk).first(), n),
        "read": measure(lambda: run("resources/read", {"uri": f"notes://{target.pk}"}), n),
        "list first page": measure(lambda: run("resources/list", {}), n),
        "list last page": measure(lambda: run("resources/list", {"cursor": last_cursor}), n),
        "complete pk": measure(
            lambda: run(
                "completion/complete",
                {"ref": {"type": "ref/resource", "uri": "notes://{pk}"}, "argument": {"name": "pk", "value": "1"}},
            ),
            n,
        ),
        "save + notify": measure(save, n),
    }
    base = statistics.median(results["baseline"])
    print(f"rows per user: {args.rows}, page size: {page_size}, pages listed: {pages}, requests: {n}")
    print(f"{'operation':<18} {'median ms':>10} {'p95 ms':>8} {'x baseline':>11}")
    for name, samples in results.items():
        samples.sort()
        median = statistics.median(samples)
        p95 = samples[int(len(samples) * 0.95) - 1]
        print(f"{name:<18} {median * 1000:>10.3f} {p95 * 1000:>8.3f} {median / base:>11.1f}")
    ratio = statistics.median(results["list last page"]) / statistics.median(results["list first page"])
    print(f"last page / first page: {ratio:.2f}")
    loop.close()


if __name__ == "__main__":
    main()
