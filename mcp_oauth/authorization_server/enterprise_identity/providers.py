"""Enterprise-Managed Authorization at the token endpoint: which IdP an ID-JAG comes from, which
clients may redeem one.

MCP ext-auth "Enterprise-Managed Authorization" §4.3. Which local user a verified ID-JAG speaks
for is the adapter's (:meth:`mcp_oauth.adapter.DefaultMCPAdapter.enterprise_user`), by default
:func:`mcp_oauth.authorization_server.enterprise_identity.users.user_for_subject`.
"""

from __future__ import annotations

from typing import Any

from mcp_oauth.models import EnterpriseIdentityProvider


def provider_for_issuer(issuer: Any) -> EnterpriseIdentityProvider | None:
    """The enabled provider whose ``issuer`` is exactly ``issuer`` (simple string comparison), or None."""
    if not isinstance(issuer, str) or not issuer or len(issuer) > 255 or "\x00" in issuer:
        return None
    return EnterpriseIdentityProvider.objects.filter(issuer=issuer, enabled=True).first()


def client_may_redeem(client) -> bool:
    """Whether ``client`` is an allowed client of at least one enabled provider (else the
    jwt-bearer grant is ``unauthorized_client`` for it)."""
    return EnterpriseIdentityProvider.objects.filter(enabled=True, allowed_clients=client).exists()
