"""The security headers of responses served outside Django's middleware (mcp_oauth.mcp_server.transport.security_headers): they follow the settings and keep the response's own."""

from __future__ import annotations

import pytest
from django.http import HttpResponse

from mcp_oauth.mcp_server.transport.security_headers import add_security_headers

pytestmark = pytest.mark.django_db(transaction=True)


def test_security_headers_follow_the_settings_and_keep_the_responses_own(settings):
    response = HttpResponse()
    add_security_headers(response)
    assert response["Referrer-Policy"] == "same-origin" and response["X-Content-Type-Options"] == "nosniff"
    settings.SECURE_REFERRER_POLICY = ["no-referrer", "strict-origin"]
    settings.SECURE_CONTENT_TYPE_NOSNIFF = False
    response = HttpResponse()
    response["Cross-Origin-Opener-Policy"] = "unsafe-none"
    add_security_headers(response)
    assert response["Referrer-Policy"] == "no-referrer,strict-origin"
    assert "X-Content-Type-Options" not in response
    assert response["Cross-Origin-Opener-Policy"] == "unsafe-none"  # the response's own header is kept
    assert list(response.headers) == ["Content-Type", "Cross-Origin-Opener-Policy", "Referrer-Policy"]
