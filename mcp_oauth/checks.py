"""System checks (``manage.py check``): configuration that breaks or weakens the MCP profile."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from .settings import DOT_SECURITY_KEYS, mcp_oauth_settings


@register(Tags.security)
def check_base_url(app_configs, **kwargs):
    """E001 BASE_URL missing or malformed; W002 http on a non-loopback host; E003 issuer with a trailing slash."""
    messages = []
    base = mcp_oauth_settings.BASE_URL
    if not base:
        return [Error('MCP_OAUTH["BASE_URL"] is not set.', hint='Set it to the site\'s public origin, e.g. "https://mcp.example.com".', id="mcp_oauth.E001")]
    parts = urlsplit(str(base))
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        messages.append(Error(f'MCP_OAUTH["BASE_URL"] {base!r} is not an http(s) origin.', id="mcp_oauth.E001"))
    elif parts.scheme == "http" and parts.hostname not in ("localhost", "127.0.0.1", "::1"):
        messages.append(
            Warning(
                f'MCP_OAUTH["BASE_URL"] {base!r} uses http on a non-loopback host.',
                hint="OAuth 2.1 §1.5 and the MCP authorization spec require https for every endpoint but loopback.",
                id="mcp_oauth.W002",
            )
        )
    issuer = mcp_oauth_settings.ISSUER
    if issuer and str(issuer).endswith("/"):
        messages.append(Error('MCP_OAUTH["ISSUER"] must not end with "/".', id="mcp_oauth.E003"))
    return messages


@register(Tags.security)
def check_dot_settings(app_configs, **kwargs):
    """W010 a setting in OAUTH2_PROVIDER weakens a secure default of the MCP profile."""
    site = getattr(settings, "OAUTH2_PROVIDER", {}) or {}
    messages = []
    for key, secure in DOT_SECURITY_KEYS.items():
        if key in site and site[key] != secure:
            messages.append(
                Warning(
                    f'OAUTH2_PROVIDER["{key}"] = {site[key]!r} weakens the MCP profile (secure value: {secure!r}).',
                    hint="Remove it from OAUTH2_PROVIDER to get the secure default.",
                    id="mcp_oauth.W010",
                )
            )
    iss = site.get("OIDC_ISS_ENDPOINT")
    if iss and mcp_oauth_settings.BASE_URL and iss.rstrip("/") != mcp_oauth_settings.issuer:
        messages.append(
            Error(
                'OAUTH2_PROVIDER["OIDC_ISS_ENDPOINT"] differs from the MCP issuer.',
                hint='Remove it; MCP_OAUTH["ISSUER"] (or BASE_URL) sets it.',
                id="mcp_oauth.E011",
            )
        )
    if site.get("ALLOWED_REDIRECT_URI_SCHEMES") and set(site["ALLOWED_REDIRECT_URI_SCHEMES"]) - {"http", "https"}:
        messages.append(
            Warning(
                "OAUTH2_PROVIDER['ALLOWED_REDIRECT_URI_SCHEMES'] allows schemes besides http(s).",
                id="mcp_oauth.W012",
            )
        )
    return messages


@register()
def check_tool_registry(app_configs, **kwargs):
    """E020 ``TOOL_REGISTRY`` does not import, or is not a ToolRegistry."""
    from django.utils.module_loading import import_string

    from .tools import ToolRegistry

    path = mcp_oauth_settings.TOOL_REGISTRY
    try:
        registry = import_string(path) if isinstance(path, str) else path
    except ImportError as exc:
        return [Error(f'MCP_OAUTH["TOOL_REGISTRY"] {path!r} cannot be imported: {exc}', id="mcp_oauth.E020")]
    if not isinstance(registry, ToolRegistry):
        return [Error(f'MCP_OAUTH["TOOL_REGISTRY"] {path!r} is not a ToolRegistry.', id="mcp_oauth.E020")]
    return []


@register()
def check_resource_and_prompt_registries(app_configs, **kwargs):
    """E021 ``RESOURCE_REGISTRY`` / E022 ``PROMPT_REGISTRY`` does not import, or is not a registry."""
    from django.utils.module_loading import import_string

    from .registry.prompts import PromptRegistry
    from .registry.resources import ResourceRegistry

    messages = []
    for key, kind, code in (("RESOURCE_REGISTRY", ResourceRegistry, "E021"), ("PROMPT_REGISTRY", PromptRegistry, "E022")):
        path = getattr(mcp_oauth_settings, key)
        try:
            registry = import_string(path) if isinstance(path, str) else path
        except ImportError as exc:
            messages.append(Error(f'MCP_OAUTH["{key}"] {path!r} cannot be imported: {exc}', id=f"mcp_oauth.{code}"))
            continue
        if not isinstance(registry, kind):
            messages.append(Error(f'MCP_OAUTH["{key}"] {path!r} is not a {kind.__name__}.', id=f"mcp_oauth.{code}"))
    return messages


@register()
def check_login_url(app_configs, **kwargs):
    """W030 ``LOGIN_URL`` resolves to no view: users could not log in to approve clients."""
    from django.shortcuts import resolve_url
    from django.urls import NoReverseMatch, Resolver404, resolve

    try:
        url = resolve_url(settings.LOGIN_URL)
    except NoReverseMatch:
        url = None
    if url and "://" not in url:
        try:
            resolve(url.split("?")[0])
            return []
        except Resolver404:
            pass
    elif url:
        return []  # an external login page
    return [
        Warning(
            f"LOGIN_URL {settings.LOGIN_URL!r} does not resolve to a view; the authorization endpoint sends users there.",
            hint='Add path("accounts/", include("django.contrib.auth.urls")) and a registration/login.html template, '
            "or point LOGIN_URL at your login view.",
            id="mcp_oauth.W030",
        )
    ]


@register(Tags.security)
def check_trust_and_throttling(app_configs, **kwargs):
    """E030 unknown TRUST_MODE; W031 trust permission classes left out of OAUTH2_PROVIDER; E032 bad THROTTLE_RATES."""
    from .throttling import check_settings as throttling_messages
    from .trust import check_settings as trust_messages

    return [*trust_messages(), *throttling_messages()]


@register(Tags.security)
def check_cimd_test_setting(app_configs, **kwargs):
    """E040 ``CIMD_ALLOW_LOOPBACK_FOR_TESTS`` is on outside DEBUG: the fetcher could be aimed at this host."""
    if mcp_oauth_settings.CIMD_ALLOW_LOOPBACK_FOR_TESTS and not settings.DEBUG:
        return [
            Error(
                'MCP_OAUTH["CIMD_ALLOW_LOOPBACK_FOR_TESTS"] is on with DEBUG off.',
                hint="It lets client metadata documents be fetched from loopback addresses; it is for tests only.",
                id="mcp_oauth.E040",
            )
        ]
    return []


@register(Tags.security)
def check_request_state_keys(app_configs, **kwargs):
    """E060 a ``REQUEST_STATE_KEYS`` entry is not a secret of at least 32 characters (or bytes);
    W060 no keys: ``requestState`` (MCP 2026-07-28) is sealed with a key derived from SECRET_KEY."""
    keys = mcp_oauth_settings.REQUEST_STATE_KEYS
    if not keys:
        return [
            Warning(
                'MCP_OAUTH["REQUEST_STATE_KEYS"] is not set: requestState is sealed with a key derived from SECRET_KEY.',
                hint="Set a list of random secrets (newest first) shared by every worker, so that rotating "
                "SECRET_KEY does not invalidate pending multi-round-trip requests and keys can rotate on their own.",
                id="mcp_oauth.W060",
            )
        ]
    if isinstance(keys, (str, bytes)) or not all(isinstance(k, (str, bytes)) and len(k) >= 32 for k in keys):
        return [
            Error(
                'MCP_OAUTH["REQUEST_STATE_KEYS"] must be a list of secrets of at least 32 characters each.',
                hint='e.g. [os.environ["MCP_REQUEST_STATE_KEY"]], generated with python -c "import secrets; print(secrets.token_urlsafe(48))"',
                id="mcp_oauth.E060",
            )
        ]
    return []
