"""The DPoP settings' system check (mcp_oauth.dpop.checks, ``mcp_oauth.E095``)."""

from __future__ import annotations

import pytest

from mcp_oauth.dpop.checks import check_dpop_settings


def ids(settings, **overrides):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, **overrides}
    return [(message.id, message.msg.split("]")[0]) for message in check_dpop_settings(None)]


def test_the_defaults_pass(settings):
    assert ids(settings) == []


@pytest.mark.parametrize("algorithms", [["ES256", "HS256"], ["none"], "ES256"])
def test_a_symmetric_or_unknown_algorithm_is_e095(settings, algorithms):
    assert ids(settings, DPOP_SIGNING_ALG_VALUES_SUPPORTED=algorithms) == [
        ("mcp_oauth.E095", 'MCP_OAUTH["DPOP_SIGNING_ALG_VALUES_SUPPORTED"')
    ]


def test_an_empty_list_switches_dpop_off_and_passes(settings):
    assert ids(settings, DPOP_SIGNING_ALG_VALUES_SUPPORTED=[]) == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DPOP_PROOF_MAX_AGE_SECONDS", 0),
        ("DPOP_PROOF_LEEWAY_SECONDS", -1),
        ("DPOP_NONCE_LIFETIME_SECONDS", True),
        ("DPOP_NONCE_LIFETIME_SECONDS", 1.5),
    ],
)
def test_a_window_that_is_not_a_positive_integer_is_e095(settings, name, value):
    assert ids(settings, **{name: value}) == [("mcp_oauth.E095", f'MCP_OAUTH["{name}"')]
