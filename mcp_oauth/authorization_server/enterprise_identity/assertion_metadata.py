"""What AS metadata (RFC 8414 §2) says about signed JWT assertions.

* ``token_endpoint_auth_methods_supported`` gains ``private_key_jwt`` (RFC 7523 §2.2; MCP ext-auth
  "OAuth Client Credentials": MUST include ``private_key_jwt`` or ``client_secret_basic``);
* ``token_endpoint_auth_signing_alg_values_supported``: the accepted algorithms (required with
  JWT authentication; never ``none``, RFC 8414 §2);
* ``grant_types_supported`` gains ``urn:ietf:params:oauth:grant-type:jwt-bearer`` (RFC 7523 §2.1:
  the ID-JAG of Enterprise-Managed Authorization) while ``ENTERPRISE_MANAGED_AUTHORIZATION`` is on.
"""

from __future__ import annotations

from typing import Any

from mcp_oauth.authorization_server.client_auth.assertions import accepted_algorithms
from mcp_oauth.authorization_server.client_auth.client_assertion import PRIVATE_KEY_JWT
from mcp_oauth.authorization_server.enterprise_identity.jwt_bearer import JWT_BEARER_GRANT_TYPE
from mcp_oauth.settings import mcp_oauth_settings


def add_assertion_metadata(data: dict[str, Any]) -> None:
    """Add the members above to the metadata document ``data`` (in place)."""
    methods = list(data.get("token_endpoint_auth_methods_supported", []))
    if PRIVATE_KEY_JWT not in methods:
        methods.append(PRIVATE_KEY_JWT)
    data["token_endpoint_auth_methods_supported"] = methods
    data["token_endpoint_auth_signing_alg_values_supported"] = sorted(accepted_algorithms())
    grant_types = list(data.get("grant_types_supported", []))
    if mcp_oauth_settings.ENTERPRISE_MANAGED_AUTHORIZATION and JWT_BEARER_GRANT_TYPE not in grant_types:
        grant_types.append(JWT_BEARER_GRANT_TYPE)
    data["grant_types_supported"] = grant_types
