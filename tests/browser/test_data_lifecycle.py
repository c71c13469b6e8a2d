"""In Chromium (issue 28): a superuser deletes, in the admin, a user who consented (the OAuth flow of
the SDK client, in the browser), connected a provider and has a running task: afterwards nothing of
theirs remains but anonymised audit rows (a query per table), the task's tool was cancelled and the
provider was asked to revoke. And a user with 10,000 audit events downloads their export from the
connected-apps page as JSON."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from oauth2_provider.models import get_refresh_token_model

from elicitation.models import ThirdPartyConnection, ThirdPartyProvider
from mcp_oauth.mcp_server.mcp_tasks import jobs
from mcp_oauth.models import AuditEvent, Consent, McpTask
from tests.e2e.test_python_sdk import (  # noqa: F401
    PASSWORD,
    USERNAME,
    MemoryStorage,
    client_metadata,
    live,
    make_provider,
    session_run,
)
from tests.mcp_oauth.mcp_server.mcp_tasks.test_runner import SEEN, TASK_CAPS
from tests.support.browser import (
    ChromiumUser,
    chromium_executable,  # noqa: F401 - fixture
    log_in,
    loopback,  # noqa: F401 - fixture
    open_chromium,
    require_chromium,  # noqa: F401 - fixture
    shot,
)
from tests.support.lifecycle_helpers import RevocationEndpoint, leftovers

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ADMIN, ADMIN_PASSWORD = "lifecycle-admin", "admin-password-lifecycle"


def _wait(predicate, timeout=15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_superuser_deletes_a_user_with_everything_in_chromium(live, loopback, chromium_executable, request, settings):
    SEEN["cancelled"].clear()
    revocation = RevocationEndpoint()
    get_user_model().objects.create_superuser(ADMIN, "admin@example.com", ADMIN_PASSWORD)
    storage = MemoryStorage()
    metadata = client_metadata(live.port, client_name="App of a leaver", redirect_uri=loopback.redirect_uri)
    seen: dict = {}

    async def consent_in_browser():
        async with open_chromium(chromium_executable, request.node.name + "-consent") as chromium:
            page = await chromium.new_page()
            await session_run(
                live,
                make_provider(live, storage, ChromiumUser(page, USERNAME, PASSWORD, loopback), metadata=metadata),
                "legacy",
            )

    asyncio.run(consent_in_browser())
    # The task's tool (after the SDK flow, which calls the site's whoami).
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "TOOL_REGISTRY": "tests.mcp_oauth.mcp_server.mcp_tasks.test_runner.REGISTRY",
        "TASKS_EXECUTOR": "thread",
        "TASKS_CANCEL_POLL_SECONDS": 0.05,
    }
    person = get_user_model().objects.get(username=USERNAME)
    pk = person.pk
    assert Consent.objects.filter(user=person).exists()
    refresh = get_refresh_token_model().objects.filter(user=person).first()
    state = {"families": [refresh.token_family], "checksums": [refresh.token_checksum]}

    provider = ThirdPartyProvider(
        slug="docs",
        name="Docs",
        authorization_endpoint="https://docs.example.com/authorize",
        token_endpoint="https://docs.example.com/token",
        revocation_endpoint=revocation.url,
        client_id="site",
        token_endpoint_auth_method=ThirdPartyProvider.AuthMethod.NONE,
    )
    provider.save()
    connection = ThirdPartyConnection(user=person, provider=provider, scopes="read")
    connection.access_token = "leaver-provider-token"
    connection.save()

    task = McpTask.objects.create(
        tool_name="compute",
        arguments={"seconds": 60, "label": "leaver"},
        user=person,
        application=Consent.objects.get(user=person).application,
        resource=live_resource(),
        scopes="mcp",
        protocol_version="2026-07-28",
        client_capabilities=TASK_CAPS,
        queued_at=timezone.now(),
    )
    jobs.dispatch(task.pk)
    assert _wait(lambda: McpTask.objects.filter(pk=task.pk).exclude(lease="").exists())
    AuditEvent.objects.create(kind="token.issued", user=person, ip_address="203.0.113.7", detail={"user_id": str(pk)})
    theirs = set(AuditEvent.objects.filter(user=person).values_list("pk", flat=True))
    assert len(theirs) >= 3  # consent granted, token issued (the flow's), and the one above

    async def delete_in_admin():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            await page.goto(live.base + "/admin/")
            await log_in(page, ADMIN, ADMIN_PASSWORD)
            await page.goto(f"{live.base}/admin/auth/user/{pk}/delete/")
            await shot(page, "admin-delete-user")
            seen["confirm_status"] = await page.title()
            seen["summary"] = await page.inner_text("#content")
            async with page.expect_navigation():
                await page.click('#content form input[type="submit"]')
            await shot(page, "admin-user-deleted")
            seen["message"] = await page.inner_text(".messagelist")

    asyncio.run(delete_in_admin())
    try:
        assert "Are you sure" in seen["summary"], seen["summary"][:500]
        assert "deleted successfully" in seen["message"], seen["message"]
        assert not get_user_model().objects.filter(pk=pk).exists()
        assert leftovers(pk, state) == {}
        assert _wait(lambda: SEEN["cancelled"] == [("leaver", True)]), SEEN
        assert revocation.arrived.wait(10) and "token=leaver-provider-token" in "".join(revocation.received)
        kept = list(AuditEvent.objects.filter(pk__in=theirs))
        assert len(kept) == len(theirs), "the audit rows stay"
        for event in kept:
            assert event.user_id is None and event.ip_address is None, (event.kind, event.user_id, event.ip_address)
        for event in AuditEvent.objects.all():
            assert str(event.detail.get("user_id")) != str(pk) and event.detail.get("expected_user") != pk, event.detail
    finally:
        revocation.close()


def live_resource():
    from mcp_oauth.models import ProtectedResource

    return ProtectedResource.objects.default()


def test_the_user_downloads_their_export_in_chromium(live, chromium_executable, request, tmp_path):
    person = get_user_model().objects.get(username=USERNAME)
    now = timezone.now()
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(kind="token.issued", user=person, created_at=now, client_id=f"c{i}", detail={"n": i})
            for i in range(10_000)
        ],
        batch_size=2000,
    )

    async def download():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            await page.goto(live.base + "/oauth/connected-apps/")
            await log_in(page, USERNAME, PASSWORD)
            await shot(page, "connected-apps-export")
            async with page.expect_download() as info:
                await page.click("#export-data")
            download = await info.value
            target = tmp_path / download.suggested_filename
            await download.save_as(target)
            return download.suggested_filename, target

    name, target = asyncio.run(download())
    assert name.startswith("mcp-data-demo-") and name.endswith(".json")
    document = json.loads(target.read_text())
    assert document["user"]["username"] == USERNAME
    assert len(document["sections"]["audit_events"]) == 10_000
    assert {"consents", "access_tokens", "third_party_connections", "stored_secrets"} <= set(document["sections"])
