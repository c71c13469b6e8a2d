"""Prometheus metrics (mcp_oauth.observability.metrics): the endpoint's protection and the counts.

Every count is checked to move by exactly the number of requests sent, through the real views
(tool calls, the token endpoint, consent, registration) and the real signals.
"""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from django.test import Client

from mcp_oauth.mcp_server.tools import ToolContext, ToolRegistry
from mcp_oauth.mcp_server.transport import observers
from mcp_oauth.observability import metrics, metrics_receivers
from mcp_oauth.signals import request_shed, task_created, task_finished
from tests.support.oauth_helpers import basic, get_code, token_request

pytestmark = pytest.mark.django_db

REGISTRY = ToolRegistry("metrics-tests")
V = "2026-07-28"


@REGISTRY.tool
def fine(ctx: ToolContext) -> str:
    return "ok"


@REGISTRY.tool
def broken(ctx: ToolContext) -> str:
    raise ValueError("tool failed")


@pytest.fixture
def metrics_on(settings):
    """Metrics on (a fresh in-process registry) with the MCP observer installed, as wiring does."""
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "METRICS_ENABLED": True,
        "TOOL_REGISTRY": "tests.mcp_oauth.observability.test_metrics.REGISTRY",
    }
    observers.add_observer(metrics_receivers.observer)
    current = metrics.active()
    assert current is not None
    yield current
    observers.remove_observer(metrics_receivers.observer)


def value(current, name: str, **labels: str) -> float:
    return current.registry.get_sample_value(name, labels) or 0.0


def call_tool(client, token: str, name: str, method: str = "tools/call"):
    meta = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    }
    message = {"jsonrpc": "2.0", "id": 3, "method": method, "params": {"name": name, "arguments": {}, "_meta": meta}}
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": V,
        "Mcp-Method": method,
        "Mcp-Name": name,
    }
    return client.post("/mcp", json.dumps(message), content_type="application/json", headers=headers)


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, resource=resource.uri)


# --- the endpoint ------------------------------------------------------------------------------


def test_off_by_default_the_endpoint_is_404_and_prometheus_client_is_never_imported(client):
    assert metrics.active() is None
    assert client.get("/metrics").status_code == 404
    probe = (
        "import os, sys; os.environ['DJANGO_SETTINGS_MODULE'] = 'project.settings';"
        "import project.asgi;"
        "from django.test import Client; assert Client(HTTP_HOST='127.0.0.1').get('/metrics').status_code == 404;"
        "print('prometheus_client' in sys.modules, 'opentelemetry' in sys.modules)"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("MCP_METRICS", "MCP_REQUEST_LOG")}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "False"


def test_loopback_only_by_default(metrics_on):
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="::1").get("/metrics").status_code == 200
    refused = Client(REMOTE_ADDR="10.1.2.3").get("/metrics")
    assert refused.status_code == 403
    assert b"mcp_" not in refused.content
    assert Client(REMOTE_ADDR="not-an-address").get("/metrics").status_code == 403


def test_allowed_networks(settings, metrics_on):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_ALLOWED_NETWORKS": ["10.0.0.0/8", "2001:db8::/32"]}
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="::ffff:10.9.9.9").get("/metrics").status_code == 200  # IPv4-mapped
    assert Client(REMOTE_ADDR="2001:db8::5").get("/metrics").status_code == 200
    assert Client(REMOTE_ADDR="11.0.0.1").get("/metrics").status_code == 403
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 403  # loopback no longer listed


def test_bearer_token(settings, metrics_on):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_BEARER_TOKEN": "s3cret-scrape-token"}
    client = Client(REMOTE_ADDR="127.0.0.1")
    missing = client.get("/metrics")
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape-token-and-more").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Basic s3cret-scrape-token").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape-token").status_code == 200
    assert client.get("/metrics", HTTP_AUTHORIZATION="bearer s3cret-scrape-token").status_code == 200
    # the network check comes first: 403 even with the right token
    outsider = Client(REMOTE_ADDR="10.1.2.3")
    assert outsider.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape-token").status_code == 403


def test_token_alone_with_every_address(settings, metrics_on):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_ALLOWED_NETWORKS": [], "METRICS_BEARER_TOKEN": "t0ken"}
    outsider = Client(REMOTE_ADDR="203.0.113.9")
    assert outsider.get("/metrics").status_code == 401
    assert outsider.get("/metrics", HTTP_AUTHORIZATION="Bearer t0ken").status_code == 200


def test_only_get_and_head(metrics_on):
    client = Client(REMOTE_ADDR="127.0.0.1")
    response = client.post("/metrics")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"
    assert client.head("/metrics").status_code == 200


def test_text_format_and_openmetrics_by_accept(metrics_on, client, token):
    call_tool(client, token, "fine")
    scraper = Client(REMOTE_ADDR="127.0.0.1")
    text = scraper.get("/metrics")
    assert text["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert text["Cache-Control"] == "no-store"
    body = text.content.decode()
    assert 'mcp_tool_calls_total{outcome="ok",tool="fine"} 1.0' in body
    assert "# TYPE mcp_request_duration_seconds histogram" in body
    om = scraper.get("/metrics", HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")
    assert om["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    assert om.content.decode().endswith("# EOF\n")
    assert 'mcp_tool_calls_total{outcome="ok",tool="fine"} 1.0' in om.content.decode()


def test_system_checks(settings):
    from mcp_oauth.observability.metrics_checks import check_metrics_settings

    assert check_metrics_settings() == []  # off
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_ENABLED": True}
    assert check_metrics_settings() == []  # loopback by default
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_ALLOWED_NETWORKS": ["10.0.0.0/33"]}
    assert [m.id for m in check_metrics_settings()] == ["mcp_oauth.E135"]
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_ALLOWED_NETWORKS": []}
    assert [m.id for m in check_metrics_settings()] == ["mcp_oauth.W136"]


# --- the counts --------------------------------------------------------------------------------


def test_tool_calls_by_tool_and_outcome_and_durations(metrics_on, client, token):
    for _ in range(3):
        assert call_tool(client, token, "fine").json()["result"]["isError"] is False
    for _ in range(2):
        assert call_tool(client, token, "broken").json()["result"]["isError"] is True
    assert call_tool(client, token, "made-up-name-1").json()["error"]["code"] == -32602
    assert call_tool(client, token, "made-up-name-2").json()["error"]["code"] == -32602
    assert call_tool(client, token, "fine", method="no/such/method").json()["error"]["code"] == -32601
    m = metrics_on
    assert value(m, "mcp_tool_calls_total", tool="fine", outcome="ok") == 3
    assert value(m, "mcp_tool_calls_total", tool="broken", outcome="tool_error") == 2
    # names the client made up are one series, not one each (cardinality)
    assert value(m, "mcp_tool_calls_total", tool="_unknown", outcome="error") == 2
    assert value(m, "mcp_request_duration_seconds_count", method="tools/call", era="modern") == 7
    assert value(m, "mcp_request_duration_seconds_bucket", method="tools/call", era="modern", le="+Inf") == 7
    labels = {v for metric in m.registry.collect() for s in metric.samples for v in s.labels.values()}
    assert "made-up-name-1" not in labels and "no/such/method" not in labels


def test_client_id_labels_only_by_setting(settings, metrics_on, client, token, public_app):
    call_tool(client, token, "fine")
    assert "client_id" not in {k for s in next(iter(metrics_on.tool_calls.collect())).samples for k in s.labels}
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_CLIENT_ID_LABELS": True}
    current = metrics.active()
    call_tool(client, token, "fine")
    assert value(current, "mcp_tool_calls_total", tool="fine", outcome="ok", client_id=public_app.client_id) == 1


def test_grants_refusals_and_consents(metrics_on, client, user, public_app, service):
    m = metrics_on
    client.force_login(user)
    code, verifier, _ = get_code(client, public_app)
    assert token_request(client, public_app, code, verifier).status_code == 200
    replay = token_request(client, public_app, code, verifier)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    app, secret = service
    for _ in range(2):
        granted = Client().post(
            "/oauth/token", {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION=basic(app.client_id, secret)
        )
        assert granted.status_code == 200, granted.content
    wrong = Client().post(
        "/oauth/token", {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION=basic(app.client_id, "nope")
    )
    assert wrong.status_code == 401
    assert value(m, "mcp_oauth_grants_issued_total", grant_type="authorization_code", client_auth="none") == 1
    assert (
        value(m, "mcp_oauth_grants_issued_total", grant_type="client_credentials", client_auth="client_secret_basic")
        == 2
    )
    assert value(m, "mcp_oauth_token_refusals_total", error="invalid_grant") == 1
    assert value(m, "mcp_oauth_token_refusals_total", error="invalid_client") == 1
    assert value(m, "mcp_oauth_consents_total", decision="granted") == 1
    assert value(m, "mcp_oauth_consents_total", decision="denied") == 0


def test_a_dpop_proof_error_at_the_token_endpoint(metrics_on, service):
    app, secret = service
    refused = Client().post(
        "/oauth/token",
        {"grant_type": "client_credentials"},
        HTTP_AUTHORIZATION=basic(app.client_id, secret),
        HTTP_DPOP="not-a-jwt",
    )
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_dpop_proof"
    assert value(metrics_on, "mcp_dpop_proof_errors_total", endpoint="token", error="invalid_dpop_proof") == 1
    assert value(metrics_on, "mcp_oauth_token_refusals_total", error="invalid_dpop_proof") == 1
    assert (
        value(
            metrics_on,
            "mcp_oauth_grants_issued_total",
            grant_type="client_credentials",
            client_auth="client_secret_basic",
        )
        == 0
    )


def test_a_declined_consent(metrics_on, client, user, public_app):
    from tests.support.oauth_helpers import authorize_params, consent, pkce_pair

    client.force_login(user)
    _, challenge = pkce_pair()
    response = consent(client, authorize_params(public_app, challenge), allow=False)
    assert response.status_code in (302, 303) and "error=access_denied" in response["Location"]
    assert value(metrics_on, "mcp_oauth_consents_total", decision="denied") == 1
    assert value(metrics_on, "mcp_oauth_consents_total", decision="granted") == 0


def test_a_dynamic_registration(metrics_on, client, resource):
    body = {"client_name": "dcr", "redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "none"}
    response = client.post("/oauth/register", json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content
    assert value(metrics_on, "mcp_oauth_registrations_total") == 1


def test_throttled_token_requests_are_counted_as_shed(settings, metrics_on, service):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "THROTTLE_RATES": {**settings.MCP_OAUTH.get("THROTTLE_RATES", {})}}
    settings.MCP_OAUTH["THROTTLE_RATES"]["token"] = "2/minute"
    settings.MCP_OAUTH = dict(settings.MCP_OAUTH)
    current = metrics.active()
    app, secret = service
    statuses = [
        Client()
        .post("/oauth/token", {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION=basic(app.client_id, secret))
        .status_code
        for _ in range(5)
    ]
    assert statuses == [200, 200, 429, 429, 429]
    assert value(current, "mcp_requests_shed_total", reason="throttled") == 3
    assert value(current, "mcp_oauth_token_refusals_total", error="slow_down") == 3


def test_shed_tasks_and_assertion_refusals_from_signals(metrics_on):
    request_shed.send(sender=None, reason="in_flight", client_id=None, path="/mcp")
    request_shed.send(sender=None, reason="rate_limit", client_id="c1", path="/mcp")
    request_shed.send(sender=None, reason="rate_limit", client_id="c2", path="/mcp")
    task_created.send(sender=None, task=SimpleNamespace(status="working"))
    task_finished.send(sender=None, task=SimpleNamespace(status="completed"))
    task_finished.send(sender=None, task=SimpleNamespace(status="failed"))
    from mcp_oauth.audit import record

    record("assertion.refused", detail={"assertion_kind": "client_assertion", "reason": "expired"})
    record("cimd.fetch_failed", detail={"reason": "http_status"})
    m = metrics_on
    assert value(m, "mcp_requests_shed_total", reason="in_flight") == 1
    assert value(m, "mcp_requests_shed_total", reason="rate_limit") == 2
    assert value(m, "mcp_tasks_total", status="created") == 1
    assert value(m, "mcp_tasks_total", status="completed") == 1
    assert value(m, "mcp_tasks_total", status="failed") == 1
    assert value(m, "mcp_oauth_assertion_refusals_total", assertion_kind="client_assertion", reason="expired") == 1
    assert value(m, "mcp_cimd_fetch_failures_total", reason="http_status") == 1


def test_cimd_fetch_outcomes(metrics_on):
    for outcome in ("fetched", "not_modified", "failed", "skipped", "fetched"):
        assert metrics.count_cimd_fetch(outcome) == outcome
    assert value(metrics_on, "mcp_cimd_fetches_total", outcome="fetched") == 2
    assert value(metrics_on, "mcp_cimd_fetches_total", outcome="not_modified") == 1
    assert value(metrics_on, "mcp_cimd_fetches_total", outcome="skipped") == 0


def test_elicitations_by_mode_and_outcome(metrics_on, user):
    from elicitation.models import Elicitation

    form = Elicitation.objects.create(mode=Elicitation.Mode.FORM, message="Name?", user=user)
    url = Elicitation.objects.create(mode=Elicitation.Mode.URL, message="Connect", user=user)
    form.status = Elicitation.Status.ACCEPTED
    form.save(update_fields=["status"])
    url.message = "Connect now"
    url.save(update_fields=["message"])  # not a status change: not counted
    url.status = Elicitation.Status.DECLINED
    url.save(update_fields=["status"])
    m = metrics_on
    assert value(m, "mcp_elicitations_total", mode="form", outcome="requested") == 1
    assert value(m, "mcp_elicitations_total", mode="url", outcome="requested") == 1
    assert value(m, "mcp_elicitations_total", mode="form", outcome="accepted") == 1
    assert value(m, "mcp_elicitations_total", mode="url", outcome="declined") == 1


def test_off_counts_nothing_and_costs_one_test(client, token):
    assert metrics.active() is None
    assert metrics_receivers.observer not in observers.installed()
    metrics.count_shed("in_flight")
    metrics.count_elicitation("form", "requested")
    assert client.get("/metrics").status_code == 404
