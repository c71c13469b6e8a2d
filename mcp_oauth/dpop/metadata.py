"""What the discovery documents say about DPoP.

* RFC 8414 authorization-server metadata: ``dpop_signing_alg_values_supported`` (RFC 9449 §5.1).
* RFC 9728 protected-resource metadata: ``dpop_signing_alg_values_supported`` and
  ``dpop_bound_access_tokens_required`` (RFC 9728 §2, RFC 9449 §7).

Both are empty when ``DPOP_SIGNING_ALG_VALUES_SUPPORTED`` is empty (DPoP off).
"""

from __future__ import annotations

from typing import Any

from ..models import ProtectedResource
from .proof import supported_algorithms

__all__ = ["authorization_server_metadata", "protected_resource_metadata"]


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
