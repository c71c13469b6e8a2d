"""The tool-call audit trail (mcp_oauth.observability.audit_trail): real tool calls through /mcp
write ToolCallRecord rows off the request path, in batches, by the writer's thread.

Transactional tests: the writer inserts from its own thread and connection, so the rows it writes
(and the users and clients they name) must be committed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from mcp_oauth.adapter import DefaultMCPAdapter
from mcp_oauth.mcp_server.tools import ToolContext, ToolRegistry
from mcp_oauth.mcp_server.transport import observers
from mcp_oauth.models import ClientProfile, ToolCallRecord, ToolCallUse
from mcp_oauth.observability import audit_trail
from mcp_oauth.observability.audit_trail import arguments_digest, canonical_json, writer
from tests.support.organizations import bind, organization

pytestmark = pytest.mark.django_db(transaction=True)

REGISTRY = ToolRegistry("audit-trail-tests")
V = "2026-07-28"


@REGISTRY.tool
def echo(ctx: ToolContext, word: str = "hi", api_token: str = "") -> str:
    return word


@REGISTRY.tool
def broken(ctx: ToolContext) -> str:
    raise ValueError("tool failed")


class NothingKept(DefaultMCPAdapter):
    def redact_tool_arguments(self, tool, arguments):
        return {"tool": tool, "kept": sorted(arguments)}


@pytest.fixture(autouse=True)
def _registry(settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "TOOL_REGISTRY": "tests.mcp_oauth.observability.test_audit_trail.REGISTRY",
    }
    writer.flush()
    yield
    writer.flush()


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, resource=resource.uri)


def call(client, token, name, arguments, *, message_id=7, headers=None):
    meta = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    }
    message = {
        "jsonrpc": "2.0",
        "id": message_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta},
    }
    return client.post(
        "/mcp",
        json.dumps(message),
        content_type="application/json",
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": V,
            "Mcp-Method": "tools/call",
            "Mcp-Name": name,
            **(headers or {}),
        },
    )


def test_the_trail_is_on_by_default_and_installed_as_an_observer():
    assert audit_trail.observer in observers.installed()


def test_a_tool_call_writes_one_row_with_what_happened(client, token, user, public_app, resource):
    before = timezone.now()
    response = call(client, token, "echo", {"word": "yo"})
    assert response.status_code == 200
    assert ToolCallRecord.objects.count() in (0, 1)  # written off the request path, maybe not yet
    assert writer.flush()
    row = ToolCallRecord.objects.get()
    assert (row.method, row.tool, row.outcome, row.error_code) == ("tools/call", "echo", "ok", None)
    assert (row.user_id, row.client_id, row.resource) == (user.pk, public_app.client_id, resource.uri)
    assert (row.era, row.protocol_version) == ("modern", V)
    assert row.arguments_digest == arguments_digest({"word": "yo"})
    assert row.arguments is None  # TOOL_CALL_AUDIT_ARGUMENTS is off by default
    assert before - timedelta(seconds=1) <= row.created_at <= timezone.now()
    assert row.duration_ms > 0
    assert row.trace_id == ""


def test_a_call_acting_for_an_organization_is_stamped_with_it(client, resource, user, public_app, mint_token):
    acme = organization("acme", user)
    chosen = mint_token(user, public_app, resource=resource.uri)
    bind(chosen, acme)
    assert call(client, chosen, "echo", {}).status_code == 200
    assert call(client, mint_token(user, public_app, resource=resource.uri), "echo", {}).status_code == 200
    assert writer.flush()
    assert sorted(ToolCallRecord.objects.values_list("organization_id", flat=True), key=str) == sorted(
        [acme.pk, None], key=str
    )


def test_tool_errors_and_json_rpc_errors_are_told_apart(client, token):
    call(client, token, "broken", {})
    call(client, token, "nope", {})
    assert writer.flush()
    rows = list(ToolCallRecord.objects.order_by("id").values_list("tool", "outcome", "error_code"))
    assert rows == [("broken", "tool_error", None), ("nope", "error", -32602)]


def test_other_methods_are_not_audited_unless_listed(client, token):
    meta = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    }
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}})
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": V,
        "Mcp-Method": "tools/list",
    }
    assert client.post("/mcp", body, content_type="application/json", headers=headers).status_code == 200
    assert writer.flush()
    assert ToolCallRecord.objects.count() == 0


def test_the_traceparent_header_gives_the_trace_id(client, token):
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    call(client, token, "echo", {}, headers={"traceparent": f"00-{trace}-00f067aa0ba902b7-01"})
    call(client, token, "echo", {}, headers={"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"})
    assert writer.flush()
    assert list(ToolCallRecord.objects.order_by("id").values_list("trace_id", flat=True)) == [trace, ""]


def test_the_digest_is_of_the_canonical_json(settings):
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()
    assert arguments_digest({"b": 1, "a": "é"}) == arguments_digest({"a": "é", "b": 1})
    key = hashlib.sha256(b"mcp_oauth.audit_trail.arguments_digest\x00" + settings.SECRET_KEY.encode()).digest()
    assert arguments_digest(None) == hmac.new(key, b"{}", hashlib.sha256).hexdigest()


def test_arguments_are_kept_only_when_asked_and_redacted_by_the_adapter(client, token, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_CALL_AUDIT_ARGUMENTS": True}
    call(client, token, "echo", {"word": "yo", "api_token": "s3cret"})
    assert writer.flush()
    row = ToolCallRecord.objects.get()
    assert row.arguments == {"word": "yo", "api_token": "[redacted]"}
    assert row.arguments_digest == arguments_digest({"word": "yo", "api_token": "s3cret"})


def test_a_site_adapter_decides_what_is_kept(client, token, settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "TOOL_CALL_AUDIT_ARGUMENTS": True,
        "ADAPTER": "tests.mcp_oauth.observability.test_audit_trail.NothingKept",
    }
    call(client, token, "echo", {"word": "yo", "api_token": "s3cret"})
    assert writer.flush()
    assert ToolCallRecord.objects.get().arguments == {"tool": "echo", "kept": ["api_token", "word"]}


def test_turned_off_the_observer_is_removed_and_nothing_is_written(client, token, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_CALL_AUDIT": False}
    assert audit_trail.observer not in observers.installed()
    assert call(client, token, "echo", {}).status_code == 200
    assert writer.flush()
    assert ToolCallRecord.objects.count() == 0


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="needs PostgreSQL (LOCK TABLE; DATABASE_URL=postgres://…)"
)
def test_a_stuck_database_never_blocks_a_request_the_overflow_is_counted_and_dropped(client, token, settings):
    """The table is locked by another transaction: the writer's INSERT waits, the queue fills, and
    the requests still answer at once; past TOOL_CALL_AUDIT_QUEUE_SIZE records are dropped."""
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_CALL_AUDIT_QUEUE_SIZE": 3, "TOOL_CALL_AUDIT_BATCH_SIZE": 2}
    dropped, written = writer.dropped, writer.written
    locked, release = threading.Event(), threading.Event()

    def hold_lock():
        from django.db import connections

        with transaction.atomic():
            with connections["default"].cursor() as cursor:
                cursor.execute(f"LOCK TABLE {ToolCallRecord._meta.db_table} IN ACCESS EXCLUSIVE MODE")
            locked.set()
            release.wait(30)
        connections["default"].close()

    holder = threading.Thread(target=hold_lock)
    holder.start()
    assert locked.wait(10)
    try:
        statuses = [call(client, token, "echo", {"word": str(n)}, message_id=n).status_code for n in range(12)]
        assert statuses == [200] * 12
        assert writer.dropped - dropped >= 12 - 3 - 2  # at most a full queue plus one batch in flight
    finally:
        release.set()
        holder.join(10)
    assert writer.flush()
    kept = ToolCallRecord.objects.count()
    assert kept == writer.written - written
    assert kept + (writer.dropped - dropped) == 12


def test_last_used_moves_forward_per_client_and_per_user(client, token, user, public_app):
    ClientProfile.objects.update_or_create(application=public_app, defaults={"last_used_at": None})
    call(client, token, "echo", {})
    call(client, token, "echo", {})
    assert writer.flush()
    newest = ToolCallRecord.objects.order_by("-created_at").first().created_at
    assert ClientProfile.objects.get(application=public_app).last_used_at == newest
    use = ToolCallUse.objects.get()
    assert (use.user_id, use.client_id, use.last_used_at) == (user.pk, public_app.client_id, newest)
    # never backward: an older batch (another process, late) leaves it alone
    ToolCallRecord.objects.all().delete()
    audit_trail._touch_last_used([(newest - timedelta(hours=1), user.pk, public_app.client_id)])
    assert ToolCallUse.objects.get().last_used_at == newest
    assert ClientProfile.objects.get(application=public_app).last_used_at == newest


def test_connected_apps_shows_the_last_tool_call(client, token, user, public_app):
    from mcp_oauth.authorization_server.tokens.grants import user_grants
    from mcp_oauth.models import Consent

    Consent.objects.create(user=user, application=public_app, scope="mcp")
    call(client, token, "echo", {})
    assert writer.flush()
    newest = ToolCallRecord.objects.get().created_at
    [grant] = user_grants(user)
    assert grant.last_used_at == newest
    client.force_login(user)
    page = client.get("/oauth/connected-apps/").content.decode()
    assert timezone.localtime(newest).strftime("%Y-%m-%d %H:%M") in page


def test_the_queue_is_written_at_exit(client, token):
    """``stop()`` (the atexit hook) writes what is queued before the thread ends."""
    call(client, token, "echo", {})
    call(client, token, "echo", {})
    writer.stop()
    assert ToolCallRecord.objects.count() == 2
    call(client, token, "echo", {})  # the next record starts a new thread
    assert writer.flush()
    assert ToolCallRecord.objects.count() == 3


def test_calls_wait_in_memory_for_the_flush_interval(client, token, settings):
    """Nothing is written per request: the calls wait in the queue until the interval (or a full
    batch, or the exit) makes the writer insert them together."""
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_CALL_AUDIT_FLUSH_MILLISECONDS": 60_000}
    writer.stop()  # the next record starts a thread with the long interval
    calls = [call(client, token, "echo", {"word": str(n)}, message_id=n) for n in range(20)]
    assert [r.status_code for r in calls] == [200] * 20
    assert writer.pending() == 20
    assert ToolCallRecord.objects.count() == 0
    writer.stop()
    assert ToolCallRecord.objects.count() == 20
