"""Models of the app, one module per subject; all importable from ``mcp_oauth.models``."""

from .audit import AuditEvent
from .cimd import ClientMetadataDocument
from .consent import Consent, revoke_client_tokens
from .core import (
    ClientProfile,
    McpSession,
    McpSessionEvent,
    ProtectedResource,
    RedeemedAuthorizationCode,
    new_session_id,
)
from .dpop import DPoPBinding
from .enterprise import EnterpriseIdentity, EnterpriseIdentityProvider, UsedAssertion
from .mcp_tasks import McpTask, new_task_id
from .refresh import RefreshGeneration, RefreshTokenGeneration
from .subscriptions import ResourceSubscription
from .trust import TrustRule

__all__ = [
    "AuditEvent",
    "ClientMetadataDocument",
    "ClientProfile",
    "Consent",
    "EnterpriseIdentity",
    "EnterpriseIdentityProvider",
    "DPoPBinding",
    "McpSession",
    "McpSessionEvent",
    "McpTask",
    "ProtectedResource",
    "RedeemedAuthorizationCode",
    "RefreshGeneration",
    "RefreshTokenGeneration",
    "ResourceSubscription",
    "TrustRule",
    "UsedAssertion",
    "new_session_id",
    "new_task_id",
    "revoke_client_tokens",
]
