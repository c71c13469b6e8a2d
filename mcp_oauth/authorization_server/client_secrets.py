"""Deprecated: :mod:`mcp_oauth.authorization_server.client_auth.client_secrets` (moved by issue 29). Kept for sites whose settings name
the old path (PASSWORD_HASHERS); importing it warns. Change the setting to the new path; this alias goes in 1.0.
"""

# house_moves: alias of a moved module

from __future__ import annotations

import warnings

from mcp_oauth.authorization_server.client_auth.client_secrets import (
    ALGORITHM,
    HASHER_PATH,
    ClientSecretHasher,
    hash_client_secret,
)

__all__ = ["ALGORITHM", "ClientSecretHasher", "HASHER_PATH", "hash_client_secret"]

warnings.warn(
    "mcp_oauth.authorization_server.client_secrets moved to mcp_oauth.authorization_server.client_auth.client_secrets: change the dotted path in your settings.",
    DeprecationWarning,
    stacklevel=2,
)
