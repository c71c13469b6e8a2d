"""The app's start-up wiring, run once by :meth:`mcp_oauth.apps.MCPOAuthConfig.ready` through :func:`wire`.

Everything here needs the app registry ready (models, the user and application models), so this
module is imported by ``ready()`` only, never at app-loading time: that is why ``ready()`` imports it
inside the method and every import below sits at the top. :func:`wire`:

* installs the secure DOT defaults and the app's version of DOT's deploy check (:mod:`mcp_oauth.checks`,
  whose ``@register`` decorators run on this import);
* connects the receivers: token-cache and client-cache invalidation, session-stream wake-ups, the
  user and client lifecycle, the default resource after ``migrate``, and the drop of DOT's cached
  oauthlib servers when a setting they were built from changes;
* assembles the MCP method table and the authorization extensions;
* imports the modules where installed apps and the site register tools, resources and prompts
  (:mod:`mcp_oauth.site_modules`, whose checks register on this import).;
* installs the tool-call audit trail's observer when ``TOOL_CALL_AUDIT`` is on (again whenever
  ``MCP_OAUTH`` changes) and connects its user-data export and erasure receivers.
"""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.contrib.auth import get_user_model
from django.core.signals import setting_changed
from django.db.models.signals import post_migrate, post_save
from oauth2_provider.models import get_application_model
from oauth2_provider.views.mixins import OAuthLibMixin

from mcp_oauth import checks
from mcp_oauth.audit import audit_event
from mcp_oauth.authorization_server.client_auth.auth_extensions import register_auth_extensions
from mcp_oauth.authorization_server.client_registry.clients import connect_receivers as connect_client_cache_receivers
from mcp_oauth.authorization_server.organizations import client_withdrawal
from mcp_oauth.authorization_server.token_exchange.inprocess import exchange_token
from mcp_oauth.authorization_server.user_data.lifecycle import connect as connect_user_lifecycle
from mcp_oauth.authorization_server.user_data.lifecycle import connect_client as connect_client_lifecycle
from mcp_oauth.authorization_server.user_data.memberships import connect as connect_memberships
from mcp_oauth.mcp_server import features  # checks: registers the system checks
from mcp_oauth.mcp_server.transport import drain, sessions, wakeup
from mcp_oauth.mcp_server.transport.observers import add_observer, remove_observer
from mcp_oauth.mcp_server.transport.token_exchange import set_exchanger
from mcp_oauth.models import Organization
from mcp_oauth.observability import (
    audit_trail,
    audit_trail_users,
    metrics_checks,  # noqa: F401 - registers the metrics system checks
    metrics_receivers,
    request_log,
    tracing,
)
from mcp_oauth.resource_server.cache import connect_receivers as connect_token_cache_receivers
from mcp_oauth.resource_server.default_resource import sync_default_resource
from mcp_oauth.resource_server.jwt_revocation import connect_receivers as connect_jwt_revocation_receivers
from mcp_oauth.resource_server.organization_endpoints import sync_organization_endpoint
from mcp_oauth.resource_server.organization_receivers import connect_receivers as connect_organization_cache_receivers
from mcp_oauth.settings import apply_dot_defaults, mcp_oauth_settings
from mcp_oauth.shared import db_pool
from mcp_oauth.signals import user_data_erase, user_data_export
from mcp_oauth.site_modules import import_site_modules

__all__ = ["drop_cached_oauthlib_servers", "wire"]


def wire(app_config: AppConfig) -> None:
    """Wire the app (once, from ``ready()``; every receiver is connected with a ``dispatch_uid``)."""
    apply_dot_defaults()
    checks.replace_dot_bcp_check()
    setting_changed.connect(_dot_settings_changed, dispatch_uid="mcp_oauth.wiring.dot_settings_changed")
    connect_token_cache_receivers()
    connect_organization_cache_receivers()  # memberships, approvals and token organizations kept with entries
    connect_client_cache_receivers()
    connect_jwt_revocation_receivers()  # JWT access tokens: the deny-list, key and client generations
    wakeup.connect_receivers()
    db_pool.connect_receivers()  # pooled PostgreSQL connections the server closed are never handed out
    sessions.connect_receivers()
    connect_user_lifecycle(get_user_model())
    connect_client_lifecycle(get_application_model())
    connect_memberships()  # a member removed keeps nothing of the organization
    client_withdrawal.connect()  # a client an organization denies keeps nothing of it
    post_save.connect(sync_organization_endpoint, sender=Organization, dispatch_uid="mcp_oauth.organization_endpoint")
    post_migrate.connect(sync_default_resource, sender=app_config, dispatch_uid="mcp_oauth.sync_default_resource")
    # The MCP method table: the transport core's methods plus the features' (mcp_oauth.mcp_server.features).
    features.install()
    register_auth_extensions()
    set_exchanger(exchange_token)  # ToolContext.exchange_token (RFC 8693, in process)
    import_site_modules()  # every installed app's mcp_tools / mcp_resources / mcp_prompts, and the named modules
    tracing.install(add_observer)  # OpenTelemetry, when on (MCP_OAUTH["TRACING"]; OTEL_* variables)
    metrics_receivers.connect()  # Prometheus metrics (METRICS_ENABLED)
    if mcp_oauth_settings.METRICS_ENABLED:
        add_observer(metrics_receivers.observer)
    request_log.connect(audit_event)  # the JSON request log (REQUEST_LOG_ENABLED)
    if mcp_oauth_settings.REQUEST_LOG_ENABLED:
        add_observer(request_log.observer)
    _sync_audit_trail()
    drain.add_listener(audit_trail.writer.wake)  # a draining worker writes its queued calls at once
    user_data_export.connect(audit_trail_users.export_tool_calls, dispatch_uid="mcp_oauth.audit_trail.export")
    user_data_erase.connect(audit_trail_users.erase_tool_calls, dispatch_uid="mcp_oauth.audit_trail.erase")


def drop_cached_oauthlib_servers() -> None:
    """Forget the oauthlib servers DOT caches on its view classes (``_oauthlib_core``).

    DOT builds them once per view class with the settings of that moment (token lifetimes,
    validator, grants); after a settings change they must be rebuilt or every later request
    keeps the old values.
    """
    pending: list[type] = [OAuthLibMixin]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if "_oauthlib_core" in cls.__dict__:
            delattr(cls, "_oauthlib_core")


def _dot_settings_changed(*, setting: str, **kwargs: Any) -> None:
    # mcp_oauth.settings reloads MCP_OAUTH and DOT's defaults on the same signal (connected first,
    # at its import); the servers are rebuilt from those on the next request.
    if setting in ("MCP_OAUTH", "OAUTH2_PROVIDER"):
        drop_cached_oauthlib_servers()
    if setting == "MCP_OAUTH":
        _sync_audit_trail()


def _sync_audit_trail() -> None:
    """Install the tool-call audit trail's observer when ``TOOL_CALL_AUDIT`` is on, else remove it."""
    (add_observer if mcp_oauth_settings.TOOL_CALL_AUDIT else remove_observer)(audit_trail.observer)
