"""Models of the app, one module per subject; all importable from ``mcp_oauth.models``."""

from mcp_oauth.models.audit import AuditEvent
from mcp_oauth.models.cimd import ClientMetadataDocument
from mcp_oauth.models.consent import Consent, revoke_client_tokens
from mcp_oauth.models.core import (
    ClientProfile,
    McpSession,
    McpSessionEvent,
    ProtectedResource,
    RedeemedAuthorizationCode,
    new_session_id,
)
from mcp_oauth.models.dpop import DPoPBinding
from mcp_oauth.models.enterprise import EnterpriseIdentity, EnterpriseIdentityProvider, UsedAssertion
from mcp_oauth.models.fleet import FleetSecret
from mcp_oauth.models.mcp_tasks import McpTask, new_task_id
from mcp_oauth.models.organizations import (
    Organization,
    OrganizationClient,
    OrganizationMembership,
    TokenOrganization,
)
from mcp_oauth.models.refresh import RefreshGeneration, RefreshTokenGeneration
from mcp_oauth.models.revocation import RevocationStamp
from mcp_oauth.models.signing_keys import AccessTokenSigningKey
from mcp_oauth.models.skills import Skill, SkillFile
from mcp_oauth.models.subscriptions import ResourceSubscription
from mcp_oauth.models.token_exchange import TokenActor
from mcp_oauth.models.tool_calls import ToolCallDashboard, ToolCallRecord, ToolCallUse
from mcp_oauth.models.trust import TrustRule

__all__ = [
    "AccessTokenSigningKey",
    "AuditEvent",
    "ClientMetadataDocument",
    "ClientProfile",
    "Consent",
    "EnterpriseIdentity",
    "EnterpriseIdentityProvider",
    "FleetSecret",
    "DPoPBinding",
    "McpSession",
    "McpSessionEvent",
    "McpTask",
    "Organization",
    "OrganizationClient",
    "OrganizationMembership",
    "ProtectedResource",
    "RedeemedAuthorizationCode",
    "RefreshGeneration",
    "RefreshTokenGeneration",
    "ResourceSubscription",
    "RevocationStamp",
    "Skill",
    "SkillFile",
    "ToolCallDashboard",
    "ToolCallRecord",
    "TokenActor",
    "TokenOrganization",
    "ToolCallUse",
    "TrustRule",
    "UsedAssertion",
    "new_session_id",
    "new_task_id",
    "revoke_client_tokens",
]
