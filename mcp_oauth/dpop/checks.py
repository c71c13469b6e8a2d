"""System checks of DPoP (RFC 9449; ``manage.py check``): algorithms, proof window, nonce lifetime.

Registered, with every role's, by :mod:`mcp_oauth.checks`."""

from __future__ import annotations

from django.core.checks import Error

from mcp_oauth.dpop.proof import ASYMMETRIC_ALGORITHMS
from mcp_oauth.settings import mcp_oauth_settings


def check_dpop_settings(app_configs, **kwargs):
    """E095 a DPoP setting the proof check cannot use (RFC 9449; :mod:`mcp_oauth.dpop`): an algorithm
    that is not an asymmetric JWS one, a proof window or a nonce lifetime that is not a positive number."""
    errors = []
    algorithms = mcp_oauth_settings.DPOP_SIGNING_ALG_VALUES_SUPPORTED
    if not isinstance(algorithms, (list, tuple)) or any(alg not in ASYMMETRIC_ALGORITHMS for alg in algorithms):
        errors.append(
            Error(
                'MCP_OAUTH["DPOP_SIGNING_ALG_VALUES_SUPPORTED"] must list asymmetric JWS algorithms only, out of: '
                + " ".join(ASYMMETRIC_ALGORITHMS)
                + " ([] switches DPoP off).",
                id="mcp_oauth.E095",
            )
        )
    for name, minimum in (
        ("DPOP_PROOF_MAX_AGE_SECONDS", 1),
        ("DPOP_PROOF_LEEWAY_SECONDS", 0),
        ("DPOP_NONCE_LIFETIME_SECONDS", 1),
    ):
        value = getattr(mcp_oauth_settings, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            errors.append(Error(f'MCP_OAUTH["{name}"] must be an integer of at least {minimum}.', id="mcp_oauth.E095"))
    return errors
