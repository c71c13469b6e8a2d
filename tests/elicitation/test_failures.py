"""Why a third-party connection failed (elicitation.failures): only a plain OAuth error code is kept,
and it becomes one sentence for the callback page and the tool error."""

from __future__ import annotations

import pytest

from elicitation.failures import PREFIX, describe, provider_error, tool_error_text


@pytest.mark.parametrize("code", ["access_denied", "invalid_grant", "vendor.specific-code_2", "x" * 64])
def test_a_plain_error_code_is_kept(code):
    assert provider_error(code) == f"provider: {code}"


@pytest.mark.parametrize(
    "code",
    [
        "",
        "x" * 65,
        "<script>alert(1)</script>",
        "access denied",
        "invalid_grant'",
        "é",
        "a\nb",
        None,
        42,
        ["access_denied"],
    ],
)
def test_anything_else_is_never_stored_nor_shown(code):
    assert provider_error(code) == "provider: invalid error code"


@pytest.mark.parametrize(
    ("error", "sentence"),
    [
        ("provider: access_denied", "access was refused at GitHub (access_denied)"),
        ("provider: invalid_grant", "GitHub refused the sign-in code when this site exchanged it (invalid_grant)"),
        ("provider: network_error", "GitHub could not be reached (network_error)"),
        ("provider: invalid_client", "GitHub did not recognise this site's credentials (invalid_client)"),
        ("provider: slow_down", "GitHub answered with an error (slow_down)"),
        ("provider: invalid error code", "GitHub answered with an error (invalid error code)"),
        ("temporarily_unavailable", "GitHub is temporarily unavailable (temporarily_unavailable)"),  # no prefix
        ("provider: ", "the connection to GitHub failed"),
        ("", "the connection to GitHub failed"),
    ],
)
def test_describe(error, sentence):
    assert describe("GitHub", error) == sentence


def test_the_tool_error_says_declined_or_failed():
    assert PREFIX == "provider: "
    assert tool_error_text("Acme", "declined", "provider: access_denied") == (
        "Your Acme account was not connected: access was refused at Acme (access_denied)."
    )
    assert tool_error_text("Acme", "failed", "provider: server_error") == (
        "Connecting your Acme account failed: Acme had an internal error (server_error)."
    )
