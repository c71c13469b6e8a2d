"""Benchmark: the admin's organization-scoped lists with 10,000 organizations (issue #31).

Creates its own PostgreSQL database (``<name of DATABASE_URL's database>_orgbench``), migrates it,
bulk-creates 10,000 organizations with 10 clients each (100,000 DOT applications and as many
client decisions), an admin and a member per organization (20,000 users and memberships), a trust
rule and an enterprise IdP per organization, and some thousands of consents, Tasks, sessions, audit
events, tool calls and token organizations; then times, with Django's test client (in process, no
network; the median of 5 after a warm-up), each organization-scoped changelist as one organization's
admin (staff with no Django permission) and as a superuser (the global view), plus the organization
autocomplete and the organization filter; prints the times and query counts (target: < 200 ms
each), and drops the database at the end (``--keep`` keeps it).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_orgadmin .venv/bin/python bench/organization_admin.py
    DATABASE_URL=... .venv/bin/python bench/organization_admin.py --organizations 1000 --keep
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BATCH = 5_000
#: The bench's org admin's organization also has this many audit events and tool calls (and a
#: quarter as many Tasks): a large customer among the small ones.
BIG_ORGANIZATION = 20_000


def bench_database_url() -> tuple[str, str, str]:
    """``(maintenance URL, bench URL, bench database name)`` from DATABASE_URL."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        sys.exit("DATABASE_URL must name a PostgreSQL server (the bench creates its own database there)")
    parts = urlsplit(url)
    name = parts.path.lstrip("/") + "_orgbench"
    return urlunsplit(parts._replace(path="/postgres")), urlunsplit(parts._replace(path="/" + name)), name


def create_database(maintenance: str, name: str) -> None:
    import psycopg

    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def drop_database(maintenance: str, name: str) -> None:
    import psycopg
    from django.db import connections

    connections.close_all()
    for connection in connections.all():
        pool = getattr(connection, "pool", None)
        if pool is not None:
            pool.close()
    with psycopg.connect(maintenance, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(f"dropped database {name}")


def setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ.setdefault("DJANGO_DEBUG", "0")  # as in production: no query log kept in memory
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def load(organizations: int) -> dict:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.db import connection
    from django.utils import timezone
    from oauth2_provider.models import get_application_model

    from mcp_oauth.models import (
        AuditEvent,
        Consent,
        EnterpriseIdentityProvider,
        McpSession,
        McpTask,
        Organization,
        OrganizationClient,
        OrganizationMembership,
        TokenOrganization,
        ToolCallRecord,
        TrustRule,
    )
    from mcp_oauth.resource_server.default_resource import ensure_default_resource

    started = time.perf_counter()
    now = timezone.now()
    resource = ensure_default_resource()
    Organization.objects.bulk_create(
        (Organization(slug=f"org-{i:05d}", name=f"Organization {i:05d}") for i in range(organizations)),
        batch_size=BATCH,
    )
    orgs = list(Organization.objects.order_by("slug").values_list("pk", flat=True))
    User = get_user_model()
    password = make_password(None)
    User.objects.bulk_create(
        (
            User(
                username=f"{role}-{i:05d}",
                email=f"{role}-{i:05d}@example.com",
                password=password,
                is_staff=role == "admin",
            )
            for i in range(organizations)
            for role in ("admin", "member")
        ),
        batch_size=BATCH,
    )
    users = dict(User.objects.filter(username__regex=r"^(admin|member)-").values_list("username", "pk"))
    OrganizationMembership.objects.bulk_create(
        (
            OrganizationMembership(organization_id=org, user_id=users[f"{role}-{i:05d}"], role=role)
            for i, org in enumerate(orgs)
            for role in ("admin", "member")
        ),
        batch_size=BATCH,
    )
    Application = get_application_model()
    Application.objects.bulk_create(
        (
            Application(
                client_id=f"bench-{i:05d}-{c}",
                name=f"Client {c} of {i:05d}",
                client_type="public",
                authorization_grant_type="authorization-code",
                redirect_uris="http://127.0.0.1/callback",
                registration_source="dcr",
                client_secret="",
            )
            for i in range(organizations)
            for c in range(10)
        ),
        batch_size=BATCH,
    )
    apps = dict(Application.objects.filter(client_id__startswith="bench-").values_list("client_id", "pk"))
    statuses = ("approved", "approved", "pending", "denied")
    OrganizationClient.objects.bulk_create(
        (
            OrganizationClient(
                organization_id=org,
                application_id=apps[f"bench-{i:05d}-{c}"],
                status=statuses[c % 4],
                requested_by_id=users[f"member-{i:05d}"],
            )
            for i, org in enumerate(orgs)
            for c in range(10)
        ),
        batch_size=BATCH,
    )
    TrustRule.objects.bulk_create(
        (
            TrustRule(target="client_id_host", pattern=f"*.org{i}.example.com", action="allow", organization_id=org)
            for i, org in enumerate(orgs)
        ),
        batch_size=BATCH,
    )
    EnterpriseIdentityProvider.objects.bulk_create(
        (
            EnterpriseIdentityProvider(
                name=f"IdP {i:05d}", issuer=f"https://idp{i}.example.com", organization_id=org, jwks={"keys": []}
            )
            for i, org in enumerate(orgs)
        ),
        batch_size=BATCH,
    )
    # Some thousands of consents, Tasks, sessions, audit events, tool calls, token organizations:
    # two of each for every other organization (the bench's org admin's organization included).
    busy = [(i, org) for i, org in enumerate(orgs) if i % 2 == 0]
    Consent.objects.bulk_create(
        (
            Consent(
                user_id=users[f"member-{i:05d}"],
                application_id=apps[f"bench-{i:05d}-{c}"],
                scope="mcp",
                organization_id=org,
            )
            for i, org in busy
            for c in range(2)
        ),
        batch_size=BATCH,
    )
    middle = len(orgs) // 4 * 2  # the bench's org admin's organization: a large customer as well
    rows = busy * 4 + [(middle, orgs[middle])] * BIG_ORGANIZATION  # (index, organization) per row

    def member(i: int) -> int:
        return users[f"member-{i:05d}"]

    McpTask.objects.bulk_create(
        (
            McpTask(
                tool_name=f"tool_{n % 2}",
                created_at=now - timedelta(seconds=n),
                user_id=member(i),
                application_id=apps[f"bench-{i:05d}-{n % 10}"],
                resource=resource,
                organization_id=org,
                protocol_version="2025-11-25",
            )
            for n, (i, org) in enumerate(rows[: len(busy) * 2] + rows[len(busy) * 4 :][: BIG_ORGANIZATION // 4])
        ),
        batch_size=BATCH,
    )
    McpSession.objects.bulk_create(
        (
            McpSession(
                user_id=member(i),
                application_id=apps[f"bench-{i:05d}-0"],
                resource=resource,
                organization_id=org,
                protocol_version="2025-11-25",
            )
            for i, org in busy
        ),
        batch_size=BATCH,
    )
    AuditEvent.objects.bulk_create(
        (
            AuditEvent(
                kind="token.issued",
                created_at=now - timedelta(seconds=n),
                user_id=member(i),
                client_id=f"bench-{i:05d}-{n % 10}",
                organization_id=org,
            )
            for n, (i, org) in enumerate(rows)
        ),
        batch_size=BATCH,
    )
    ToolCallRecord.objects.bulk_create(
        (
            ToolCallRecord(
                created_at=now - timedelta(seconds=n),
                user_id=member(i),
                client_id=f"bench-{i:05d}-{n % 10}",
                organization_id=org,
                resource=resource.uri,
                tool=f"tool_{n % 4}",
                era="2025",
                protocol_version="2025-11-25",
                outcome="ok",
                duration_ms=1.0,
            )
            for n, (i, org) in enumerate(rows)
        ),
        batch_size=BATCH,
    )
    TokenOrganization.objects.bulk_create(
        (
            TokenOrganization(token_checksum=f"{i:032d}{c:032d}", token_kind="access_token", organization_id=org)
            for i, org in busy
            for c in range(2)
        ),
        batch_size=BATCH,
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    counts = {
        model.__name__: model.objects.count()
        for model in (
            Organization,
            OrganizationMembership,
            Application,
            OrganizationClient,
            Consent,
            McpTask,
            McpSession,
            AuditEvent,
            ToolCallRecord,
            TokenOrganization,
            TrustRule,
            EnterpriseIdentityProvider,
        )
    }
    print(f"load: {time.perf_counter() - started:.1f} s: " + ", ".join(f"{k} {v:,}" for k, v in counts.items()))
    return {"org": orgs[middle], "admin": f"admin-{middle:05d}"}


def reused() -> dict:
    """The focus of a kept database: the organization with the most audit events, and its admin."""
    from django.contrib.auth import get_user_model
    from django.db.models import Count

    from mcp_oauth.models import AuditEvent, OrganizationMembership

    get_user_model().objects.filter(username="bench-root").delete()
    busiest = AuditEvent.objects.values("organization").annotate(n=Count("pk")).order_by("-n")[0]["organization"]
    admin = OrganizationMembership.objects.filter(organization=busiest, role="admin").select_related("user").first()
    return {"org": busiest, "admin": admin.user.get_username()}


SCREENS = [
    "organization",
    "organizationmembership",
    "organizationclient",
    "consent",
    "mcptask",
    "mcpsession",
    "auditevent",
    "toolcallrecord",
    "trustrule",
    "enterpriseidentityprovider",
    "tokenorganization",
]


def timed(client, url: str) -> tuple[float, float, float, int, int]:
    """``(median ms, max ms, SQL ms of the median run, queries, rows listed)`` of 5 GETs of ``url``."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(url, secure=True)
    assert response.status_code == 200, (url, response.status_code, response.content[:300])
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url, secure=True)
        elapsed = (time.perf_counter() - started) * 1000
        runs.append((elapsed, sum(float(q["time"]) for q in queries.captured_queries) * 1000, len(queries)))
    runs.sort()
    median, sql, count = runs[len(runs) // 2]
    rows = len(response.context["cl"].result_list) if response.context and "cl" in response.context else -1
    return median, runs[-1][0], sql, count, rows


def measure(focus: dict) -> list[tuple[str, float]]:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()  # the test client records the pages' context (the rows listed)
    settings.ALLOWED_HOSTS = ["testserver"]
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    User = get_user_model()
    root = User.objects.create_superuser("bench-root", "root@example.com", "x")
    org_admin = User.objects.get(username=focus["admin"])
    results = []
    for who, user in (("org admin", org_admin), ("superuser", root)):
        client = Client()
        client.force_login(user)
        # the floor: the admin's index page, no list, under the same load
        cases = [("(the admin index, for scale)", "/admin/")]
        cases += [(screen, f"/admin/mcp_oauth/{screen}/") for screen in SCREENS]
        cases += [
            ("consent, organization filter", f"/admin/mcp_oauth/consent/?organization={focus['org']}"),
            ("organizationclient, pending", "/admin/mcp_oauth/organizationclient/?status__exact=pending"),
            ("organizationclient, search", "/admin/mcp_oauth/organizationclient/?q=bench-05000-3"),
            ("organization, search", "/admin/mcp_oauth/organization/?q=Organization+05000"),
            (
                "autocomplete: organization",
                "/admin/autocomplete/?app_label=mcp_oauth&model_name=trustrule&field_name=organization&term=Organization",
            ),
        ]
        print(f"{who} ({user.get_username()}):")
        for label, url in cases:
            median, worst, sql, queries, rows = timed(client, url)
            results.append((f"{who}: {label}", median))
            shown = f"{rows} rows" if rows >= 0 else ""
            print(
                f"  {label:34} {median:7.1f} ms (max {worst:7.1f})  SQL {sql:6.1f} ms in {queries:2d} queries  {shown}"
            )
    return results


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--organizations", type=int, default=10_000)
    parser.add_argument("--keep", action="store_true", help="keep the bench database")
    parser.add_argument("--reuse", action="store_true", help="measure a kept bench database again (migrated first)")
    args = parser.parse_args()
    maintenance, url, name = bench_database_url()
    if not args.reuse:
        create_database(maintenance, name)
    os.environ["DATABASE_URL"] = url
    try:
        setup()
        focus = reused() if args.reuse else load(args.organizations)
        print(f"load average before: {load_average()} ({os.cpu_count()} CPUs)")
        results = measure(focus)
        print(f"load average after: {load_average()}")
        slow = [label for label, ms in results if ms >= 200]
        print(
            f"slowest: {max(results, key=lambda r: r[1])[0]} {max(r[1] for r in results):.1f} ms; "
            + (f"over 200 ms: {slow}" if slow else "all under 200 ms")
        )
    finally:
        if not args.keep:
            drop_database(maintenance, name)


if __name__ == "__main__":
    main()
