"""What the signal receivers count (mcp_oauth.observability.metrics_receivers): grants, refusals and consents, DPoP errors, registrations, shed requests and tasks, assertion refusals, CIMD fetches, elicitations."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from django.test import Client

from mcp_oauth.observability import metrics
from mcp_oauth.signals import request_shed, task_created, task_finished
from tests.mcp_oauth.observability.test_metrics import (  # noqa: F401 - fixtures and helpers
    metrics_on,
    token,
    value,
)
from tests.support.oauth_helpers import basic, get_code, token_request

pytestmark = pytest.mark.django_db


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
