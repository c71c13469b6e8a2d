"""The one OAuth error type and renderer (mcp_oauth.errors), and that nothing else builds OAuth JSON errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mcp_oauth.errors import OAuthError, exception_handler, render_oauth_error

ROOT = Path(__file__).resolve().parents[2]


def test_renderer_sets_body_and_headers():
    response = render_oauth_error(OAuthError("slow_down", "Too many requests.", status=429, retry_after=7))
    assert response.status_code == 429
    assert json.loads(response.content) == {"error": "slow_down", "error_description": "Too many requests."}
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "no-store" and response["Pragma"] == "no-cache"
    assert response["Retry-After"] == "7"
    assert "WWW-Authenticate" not in response


def test_a_401_always_has_a_challenge(settings):
    response = OAuthError("invalid_token", 'Bad "token"', status=401).response()
    assert (
        response["WWW-Authenticate"]
        == 'Bearer realm="http://testserver", error="invalid_token", error_description="Bad \\"token\\""'
    )
    given = OAuthError("invalid_client", "x", status=401, www_authenticate='Basic realm="oauth"').response()
    assert given["WWW-Authenticate"] == 'Basic realm="oauth"'


def test_bare_challenge_has_no_error_code():
    response = OAuthError(None, "Log in first.", status=401, www_authenticate="Bearer").response()
    assert json.loads(response.content) == {"error_description": "Log in first."}


def test_exception_handler_only_handles_oauth_errors():
    assert exception_handler(ValueError("x")) is None
    assert exception_handler(OAuthError("invalid_request", "x")).status_code == 400


@pytest.mark.parametrize("pattern", [r"""JsonResponse\(\s*\{\s*["']error["']""", r"""["']error_description["']\s*:"""])
def test_no_hand_built_oauth_json_error_outside_the_renderer(pattern):
    """Issue 11: grep finds no hand-built OAuth JSON error outside mcp_oauth/errors.py."""
    offenders = []
    for folder in ("mcp_oauth", "project"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "errors.py" and path.parent.name == "mcp_oauth":
                continue
            text = path.read_text()
            for match in re.finditer(pattern, text):
                line = text.count("\n", 0, match.start()) + 1
                source = text.splitlines()[line - 1].strip()
                if source.startswith(("#", '"""', "``")) or "``" in source:
                    continue  # documentation of the shape
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {source}")
    assert offenders == []
