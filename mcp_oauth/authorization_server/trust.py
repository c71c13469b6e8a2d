"""Deprecated: :mod:`mcp_oauth.authorization_server.client_registry.trust` (moved by issue 29). Kept for sites whose settings name
the old path (DRF permission classes in OAUTH2_PROVIDER (DCR_REGISTRATION_PERMISSION_CLASSES, CIMD_REGISTRATION_PERMISSION_CLASSES)); importing it warns. Change the setting to the new path; this alias goes in 1.0.
"""

# house_moves: alias of a moved module

from __future__ import annotations

import warnings

from mcp_oauth.authorization_server.client_registry.trust import (
    TrustPolicyCIMDPermission,
    TrustPolicyDCRPermission,
    UntrustedClientAuthorizationError,
    UntrustedClientTokenError,
    Verdict,
)

__all__ = [
    "TrustPolicyCIMDPermission",
    "TrustPolicyDCRPermission",
    "UntrustedClientAuthorizationError",
    "UntrustedClientTokenError",
    "Verdict",
]

warnings.warn(
    "mcp_oauth.authorization_server.trust moved to mcp_oauth.authorization_server.client_registry.trust: change the dotted path in your settings.",
    DeprecationWarning,
    stacklevel=2,
)
