"""What the discovery documents say about DPoP.

* RFC 8414 authorization-server metadata: ``dpop_signing_alg_values_supported`` (RFC 9449 §5.1).
* RFC 9728 protected-resource metadata: ``dpop_signing_alg_values_supported`` and
  ``dpop_bound_access_tokens_required`` (RFC 9728 §2, RFC 9449 §7).

Both are empty when ``DPOP_SIGNING_ALG_VALUES_SUPPORTED`` is empty (DPoP off).
"""

from __future__ import annotations

from typing import Any

from mcp_oauth.dpop.proof import supported_algorithms
from mcp_oauth.errors import OAuthError
from mcp_oauth.models import ProtectedResource

__all__ = ["authorization_server_metadata", "dpop_registration_metadata", "protected_resource_metadata"]


def authorization_server_metadata() -> dict[str, Any]:
    """``{"dpop_signing_alg_values_supported": [...]}``, or ``{}`` when DPoP is off."""
    algorithms = supported_algorithms()
    return {"dpop_signing_alg_values_supported": algorithms} if algorithms else {}


def protected_resource_metadata(resource: ProtectedResource) -> dict[str, Any]:
    """``{"dpop_signing_alg_values_supported": [...], "dpop_bound_access_tokens_required": bool}``,
    or ``{}`` when DPoP is off."""
    algorithms = supported_algorithms()
    if not algorithms:
        return {}
    return {
        "dpop_signing_alg_values_supported": algorithms,
        "dpop_bound_access_tokens_required": bool(resource.dpop_required),
    }


def dpop_registration_metadata(data: dict[str, Any]) -> dict[str, Any]:
    """The DPoP client metadata of an RFC 7591 registration request, to keep with the client:
    ``{"dpop_bound_access_tokens": bool}`` when given (RFC 9449 §5.2), else ``{}``.

    :raises OAuthError: ``invalid_client_metadata`` when it is not a boolean.
    """
    if "dpop_bound_access_tokens" not in data:
        return {}
    value = data["dpop_bound_access_tokens"]
    if not isinstance(value, bool):
        raise OAuthError("invalid_client_metadata", "dpop_bound_access_tokens must be a boolean (RFC 9449 §5.2).")
    return {"dpop_bound_access_tokens": value}
