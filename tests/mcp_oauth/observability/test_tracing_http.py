"""Spans of the OAuth endpoints (the ASGI lane keyed by URL name), decoded by a real OTLP/HTTP
receiver: grant type, client authentication method, outcome and error code — never a secret,
a code or a token."""

from __future__ import annotations

import base64
import secrets

import pytest
from oauth2_provider.models import get_application_model

from mcp_oauth.observability import tracing_setup
from mcp_oauth.observability.tracing_http import oauth_endpoint, oauth_tracing_lane
from tests.support.asgi_client import asgi_call
from tests.support.https_server import cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures
from tests.support.tracing_helpers import otlp, traced  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db(transaction=True)

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture
def site(traced):
    from mcp_oauth.authorization_server.asgi import token_lane
    from mcp_oauth.mcp_server.transport.asgi import mcp_lane
    from project.asgi import django_application

    return oauth_tracing_lane(token_lane(mcp_lane(django_application)))


def request_span(receiver, app, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, dict]:
    """Send one request with a traceparent of its own; its OAuth span (parent checked)."""
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    status, _, _ = asgi_call(app, method, path, {**headers, "traceparent": f"00-{trace_id}-{parent_id}-01"}, body)
    tracing_setup.flush()
    spans = receiver.wait_for(lambda spans: [s for s in spans if s["trace_id"] == trace_id])
    assert len(spans) == 1
    assert spans[0]["kind"] == "SERVER" and spans[0]["parent_span_id"] == parent_id
    return status, spans[0]


def test_a_refused_code_exchange(site, traced, public_app):
    code, verifier = "the-code-" + secrets.token_urlsafe(16), "v" * 64
    body = (
        f"grant_type=authorization_code&code={code}&client_id={public_app.client_id}"
        f"&code_verifier={verifier}&redirect_uri=http://127.0.0.1/callback"
    ).encode()
    status, span = request_span(traced, site, "POST", "/oauth/token", FORM, body)
    assert status == 400
    assert span["name"] == "POST /oauth/token"
    assert span["attributes"] == {
        "http.request.method": "POST",
        "http.route": "/oauth/token",
        "oauth.endpoint": "token",
        "oauth.grant_type": "authorization_code",
        "oauth.client_auth_method": "none",
        "http.response.status_code": 400,
        "oauth.outcome": "error",
        "error.type": "invalid_grant",
    }
    assert span["status"] == "UNSET"  # a refusal is the client's error, not the server's
    assert not any(code in str(value) or verifier in str(value) for value in span["attributes"].values())


def test_a_wrong_client_secret_is_recorded_without_the_secret(site, traced):
    Application = get_application_model()
    secret = "s3cret-" + secrets.token_urlsafe(24)
    app = Application.objects.create(
        name="machine",
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
        client_secret=secret,
    )
    wrong = "wrong-" + secrets.token_urlsafe(24)
    basic = base64.b64encode(f"{app.client_id}:{wrong}".encode()).decode()
    status, span = request_span(
        traced,
        site,
        "POST",
        "/oauth/token",
        {**FORM, "Authorization": f"Basic {basic}"},
        b"grant_type=client_credentials",
    )
    assert status == 401
    attributes = span["attributes"]
    assert (attributes["oauth.client_auth_method"], attributes["oauth.grant_type"]) == (
        "client_secret_basic",
        "client_credentials",
    )
    assert (attributes["error.type"], attributes["oauth.outcome"]) == ("invalid_client", "error")
    assert not any(wrong in str(v) or secret in str(v) or basic in str(v) for v in attributes.values())

    body = f"client_id={app.client_id}&client_secret={wrong}&token=abc".encode()
    status, span = request_span(traced, site, "POST", "/oauth/revoke", FORM, body)
    assert span["name"] == "POST /oauth/revoke"
    assert span["attributes"]["oauth.client_auth_method"] == "client_secret_post"
    assert "oauth.grant_type" not in span["attributes"]
    assert not any(wrong in str(v) for v in span["attributes"].values())


def test_metadata_documents(site, traced, resource):
    status, span = request_span(traced, site, "GET", "/.well-known/oauth-protected-resource/mcp", {})
    assert status == 200
    assert span["name"] == "GET /.well-known/oauth-protected-resource/<path:resource_path>"
    assert span["attributes"] == {
        "http.request.method": "GET",
        "http.route": "/.well-known/oauth-protected-resource/<path:resource_path>",
        "oauth.endpoint": "metadata",
        "http.response.status_code": 200,
        "oauth.outcome": "ok",
    }
    status, span = request_span(traced, site, "GET", "/oauth/.well-known/oauth-authorization-server", {})
    assert (status, span["attributes"]["oauth.endpoint"], span["attributes"]["http.route"]) == (
        200,
        "metadata",
        "/oauth/.well-known/oauth-authorization-server",
    )


def test_a_registration_refusal_names_its_error(site, traced):
    status, span = request_span(
        traced, site, "POST", "/oauth/register", {"Content-Type": "application/json"}, b'{"redirect_uris": "nope"}'
    )
    assert status == 400
    assert span["attributes"]["oauth.endpoint"] == "register"
    assert (span["attributes"]["error.type"], span["attributes"]["oauth.outcome"]) == ("invalid_redirect_uri", "error")


def test_only_oauth_endpoints_are_looked_at(traced):
    assert oauth_endpoint("/mcp") is None
    assert oauth_endpoint("/admin/") is None
    assert oauth_endpoint("/oauth/login") is None  # a page, not an endpoint
    assert oauth_endpoint("/oauth/authorize") == ("authorize", "/oauth/authorize")
    assert oauth_endpoint("/oauth/register/abc") == ("register", "/oauth/register/<str:client_id>")


def test_tracing_off_leaves_the_application_alone(settings):
    async def app(scope, receive, send):  # pragma: no cover - never called
        pass

    from mcp_oauth.observability import tracing

    assert tracing.installed_runtime() is None
    assert oauth_tracing_lane(app) is app


def test_a_cimd_fetch_is_a_client_span_of_the_request(traced, cimd_env):
    from opentelemetry import trace

    from mcp_oauth.authorization_server.cimd.errors import FetchFailed
    from mcp_oauth.authorization_server.cimd.fetcher import SafeMetadataFetcher

    client_id = cimd_env.publish(max_age=600)
    missing = cimd_env.url("/gone.json")
    cimd_env.server.serve("/gone.json", status=404, body={})
    with trace.get_tracer("tests").start_as_current_span("token request") as root:
        assert SafeMetadataFetcher().fetch_document(client_id).status == 200
        with pytest.raises(FetchFailed):
            SafeMetadataFetcher().fetch_document(missing, etag='"v1"')
    tracing_setup.flush()
    trace_id, root_id = (
        format(root.get_span_context().trace_id, "032x"),
        format(root.get_span_context().span_id, "016x"),
    )
    fetched, failed = traced.wait_for(
        lambda spans: (
            (found := [s for s in spans if s["trace_id"] == trace_id and s["name"] == "cimd.fetch"])
            and len(found) == 2
            and found
        )
    )
    assert (fetched["kind"], fetched["parent_span_id"], failed["parent_span_id"]) == ("CLIENT", root_id, root_id)
    assert fetched["attributes"] == {
        "http.request.method": "GET",
        "url.full": client_id,
        "server.address": "client.cimd.test",
        "cimd.conditional": False,
        "http.response.status_code": 200,
    }
    assert (failed["attributes"]["error.type"], failed["attributes"]["cimd.conditional"], failed["status"]) == (
        "http_status",
        True,
        "ERROR",
    )
