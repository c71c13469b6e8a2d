"""Admin screens, one module per subject: clients and trust (:mod:`.clients`), the CIMD cache
(:mod:`.cimd`), tokens and consents (:mod:`.tokens`), enterprise identity (:mod:`.enterprise`),
MCP sessions and Tasks (:mod:`.tasks`), the audit log (:mod:`.audit`), the fleet's shared
secrets (:mod:`.fleet`), a user's data
(:mod:`.user_data`: the export and erase actions on the site's user admin), organizations and
their members (:mod:`.organizations`), their decisions on clients (:mod:`.organization_clients`),
skills served from the database (:mod:`.skills`).

Organization admins (users with the ``admin`` role in an organization, and staff) see and manage
their own organizations' rows on every screen that has an organization, and nothing else
(:mod:`.organization_scope`); superusers and staff with Django permissions keep the global view.

No secret or token is ever displayed: an existing application's ``client_secret`` is left
out of its change form (DOT's add form still shows a newly generated secret once, the only
moment it can be copied), tokens are only counted, and audit details never hold credentials.
Importing this package registers every screen (Django's admin autodiscovery does); the admin
classes stay importable from here.
"""

from __future__ import annotations

from mcp_oauth.admin import dashboard as dashboard_admin  # noqa: F401  (registers the MCP dashboard)
from mcp_oauth.admin import tool_calls as tool_calls_admin  # noqa: F401  (registers the tool-call list)
from mcp_oauth.admin.audit import AuditEventAdmin
from mcp_oauth.admin.cimd import ClientMetadataDocumentAdmin, DocumentStateFilter
from mcp_oauth.admin.clients import (
    TRUST_FILTER_WINDOW,
    ApplicationForm,
    ApplicationWithProfileAdmin,
    ClientProfileForm,
    ClientProfileInline,
    GrantTypeFilter,
    LastUsedFilter,
    TrustRuleAdmin,
    TrustVerdictFilter,
    block_rules_for,
)
from mcp_oauth.admin.enterprise import EnterpriseIdentityAdmin, EnterpriseIdentityProviderAdmin
from mcp_oauth.admin.fleet import FleetSecretAdmin
from mcp_oauth.admin.large_lists import USER_SEARCH
from mcp_oauth.admin.organization_clients import OrganizationClientAdmin, TokenOrganizationAdmin
from mcp_oauth.admin.organization_scope import OrganizationFilter, OrganizationScopedAdmin, administered_organizations
from mcp_oauth.admin.organizations import OrganizationAdmin, OrganizationMembershipAdmin, OrganizationMembershipInline
from mcp_oauth.admin.signing_keys import AccessTokenSigningKeyAdmin
from mcp_oauth.admin.skills import SkillAdmin
from mcp_oauth.admin.tasks import McpSessionAdmin, McpTaskAdmin
from mcp_oauth.admin.tokens import ConsentAdmin, ConsentStateFilter, DPoPBindingAdmin, ProtectedResourceAdmin
from mcp_oauth.admin.user_data import add_user_data_actions

__all__ = [
    "SkillAdmin",
    "TRUST_FILTER_WINDOW",
    "USER_SEARCH",
    "ApplicationForm",
    "ApplicationWithProfileAdmin",
    "AuditEventAdmin",
    "ClientMetadataDocumentAdmin",
    "ClientProfileForm",
    "ClientProfileInline",
    "ConsentAdmin",
    "ConsentStateFilter",
    "DPoPBindingAdmin",
    "DocumentStateFilter",
    "EnterpriseIdentityAdmin",
    "EnterpriseIdentityProviderAdmin",
    "FleetSecretAdmin",
    "AccessTokenSigningKeyAdmin",
    "GrantTypeFilter",
    "LastUsedFilter",
    "McpSessionAdmin",
    "McpTaskAdmin",
    "OrganizationAdmin",
    "OrganizationClientAdmin",
    "OrganizationFilter",
    "OrganizationMembershipAdmin",
    "OrganizationMembershipInline",
    "OrganizationScopedAdmin",
    "ProtectedResourceAdmin",
    "TrustRuleAdmin",
    "TokenOrganizationAdmin",
    "TrustVerdictFilter",
    "administered_organizations",
    "block_rules_for",
]

# The export and erase actions on the site's user admin (mcp_oauth.admin.user_data).
add_user_data_actions()
