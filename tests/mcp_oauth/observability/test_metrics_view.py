"""The metrics endpoint (mcp_oauth.observability.metrics_view): 404 when off, who may scrape (networks, bearer token), methods, text format and OpenMetrics."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.test import Client

from mcp_oauth.observability import metrics
from tests.mcp_oauth.observability.test_metrics import (  # noqa: F401 - fixtures and helpers
    call_tool,
    fine,
    metrics_on,
    token,
)

pytestmark = pytest.mark.django_db


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
