"""Attacks on the OAuth endpoints' spans (mcp_oauth.observability.tracing_http / tracing_oauth):
hostile form values and headers are never span attributes (only names matching the registry
grammar are), a hostile trace context is ignored, and no secret reaches a span."""

from __future__ import annotations

import base64
import secrets

import pytest

from tests.mcp_oauth.observability.test_tracing_http import FORM, request_span, site  # noqa: F401 - fixture
from tests.support.asgi_client import asgi_call
from tests.support.tracing_helpers import otlp, traced  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    "grant_type",
    [
        "authorization_code\nforged",
        "x" * 10_000,
        "urn:ietf:params:oauth:grant-type:" + "a" * 500,
        "%00",
        "%ED%A0%80",  # an encoded lone surrogate
        "<script>",
    ],
)
def test_a_hostile_grant_type_is_no_attribute(site, traced, public_app, grant_type):
    body = f"grant_type={grant_type}&client_id={public_app.client_id}".encode()
    status, span = request_span(traced, site, "POST", "/oauth/token", FORM, body)
    assert status == 400
    assert "oauth.grant_type" not in span["attributes"]
    assert span["attributes"]["error.type"] in ("unsupported_grant_type", "invalid_request")
    assert all(grant_type not in str(value) for value in span["attributes"].values())


def test_no_secret_code_or_token_in_the_span_of_a_grant(site, traced, service):
    app, secret = service
    basic = base64.b64encode(f"{app.client_id}:{secret}".encode()).decode()
    status, span = request_span(
        traced,
        site,
        "POST",
        "/oauth/token",
        {**FORM, "Authorization": "Basic " + basic},
        b"grant_type=client_credentials&scope=mcp",
    )
    assert status == 200
    text = repr(span)
    assert secret not in text and basic not in text


@pytest.mark.parametrize(
    "headers",
    [
        {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01" + "x" * 50_000},
        {"traceparent": "\x7f\x80\xff"},
        {"traceparent": "00-zz-yy-01", "tracestate": "=" * 10_000},
        {"Authorization": "Basic \xff\xfe"},
        {"Authorization": "Basic " + "A" * 100_000},
        {"Content-Type": "application/x-www-form-urlencoded; charset=\xff"},
    ],
)
def test_hostile_headers_are_oauth_errors_never_a_500(site, traced, public_app, headers):
    body = f"grant_type=authorization_code&code={secrets.token_hex(8)}&client_id={public_app.client_id}".encode()
    status, _, _ = asgi_call(site, "POST", "/oauth/token", {**FORM, **headers}, body)
    assert status in (400, 401)
