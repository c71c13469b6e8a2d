"""System checks of the authorization server (``manage.py check``): DOT's settings and its RFC 9700
deploy check, the login page, trust rules and throttles, CIMD's test switch, assertion algorithms,
key-set limits, the client-secret hasher.

Registered, with every role's, by :mod:`mcp_oauth.checks`."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.hashers import get_hashers_by_algorithm
from django.core.checks import CheckMessage, Error, Tags, Warning
from django.core.checks.registry import registry as check_registry
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, Resolver404, resolve
from oauth2_provider.checks import validate_bcp_configuration
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.authorization_server.client_auth.assertions import FORBIDDEN_ALGORITHMS, KEY_TYPES
from mcp_oauth.authorization_server.client_auth.client_secrets import ALGORITHM, HASHER_PATH
from mcp_oauth.authorization_server.client_registry.trust import check_settings as trust_messages
from mcp_oauth.authorization_server.pages.login import LOGIN_URL_NAME, login_url
from mcp_oauth.authorization_server.validator import MCPOAuth2Validator
from mcp_oauth.settings import DOT_SECURITY_KEYS, client_secret_hasher_listed, mcp_oauth_settings
from mcp_oauth.shared.throttling import check_settings as throttling_messages


def check_dot_settings(app_configs, **kwargs):
    """W010 a setting in OAUTH2_PROVIDER weakens a secure default of the MCP profile."""
    site = getattr(settings, "OAUTH2_PROVIDER", {}) or {}
    messages: list[CheckMessage] = []
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
    if "ALLOWED_REDIRECT_URI_SCHEMES" in site and "http" not in site["ALLOWED_REDIRECT_URI_SCHEMES"]:
        messages.append(
            Warning(
                "OAUTH2_PROVIDER['ALLOWED_REDIRECT_URI_SCHEMES'] leaves out http: desktop MCP clients, whose "
                "redirect URIs are http://127.0.0.1:<port>/… or http://localhost:<port>/… (RFC 8252 §7.3), "
                "cannot register or be authorized.",
                hint="Remove the key: the app allows http for loopback redirect URIs only, never for other hosts.",
                id="mcp_oauth.W013",
            )
        )
    return messages


#: DOT's redirect-scheme messages (``"http" in ALLOWED_REDIRECT_URI_SCHEMES``), which
#: :func:`dot_bcp_configuration` leaves out while the app's loopback-only rule is in force.
DOT_REDIRECT_SCHEME_CHECK_IDS = frozenset({"oauth2_provider.W008", "oauth2_provider.E003"})


def loopback_redirect_rule_in_force() -> bool:
    """Whether the request validator is the MCP profile's, which refuses ``http`` redirect URIs off
    loopback whatever the client's registration says (:func:`.redirects.redirect_scheme_allowed`)."""
    validator = oauth2_settings.OAUTH2_VALIDATOR_CLASS
    return isinstance(validator, type) and issubclass(validator, MCPOAuth2Validator)


def dot_bcp_configuration(app_configs, **kwargs):
    """DOT's RFC 9700 deploy check (``oauth2_provider.checks.validate_bcp_configuration``), all of it
    but the redirect-scheme message when the app's loopback-only rule is in force.

    DOT can only ask whether ``http`` is in ``ALLOWED_REDIRECT_URI_SCHEMES``: it keeps ``http``
    for every host or for none. RFC 9700 §2.1 asks for https redirect URIs except loopback ones of
    native apps (RFC 8252 §7.3), which every desktop MCP client uses; the app keeps ``http`` in
    DOT's list for them and refuses it on every other host at registration, in CIMD documents,
    in the admin form and at the authorization endpoint. With another ``OAUTH2_VALIDATOR_CLASS``
    that rule is gone, and DOT's message (``W008`` / ``E003``) is reported as DOT words it.
    """
    messages = validate_bcp_configuration(app_configs, **kwargs)
    if loopback_redirect_rule_in_force():
        messages = [message for message in messages if message.id not in DOT_REDIRECT_SCHEME_CHECK_IDS]
    return messages


def replace_dot_bcp_check() -> None:
    """Register :func:`dot_bcp_configuration` in place of DOT's own deploy check (called by the app's ``ready()``)."""
    check_registry.deployment_checks.discard(validate_bcp_configuration)
    check_registry.register(dot_bcp_configuration, Tags.security, deploy=True)


def check_login_url(app_configs, **kwargs):
    """W030 the login page users are sent to (:func:`mcp_oauth.authorization_server.pages.login.login_url`) resolves to no view;
    E031 its template cannot render (missing template or base template, broken tag or URL name)."""
    try:
        url = login_url()
    except NoReverseMatch:
        return []  # the app's URLs are not routed at all: nothing sends users to a login page
    if "://" in url or url.startswith("//"):
        return []  # a login page on another host
    view = _login_view(url)
    if view is None:
        return [
            Warning(
                f"The login page {url!r} resolves to no view; the authorization endpoint sends users there.",
                hint=f'Point LOGIN_URL (or MCP_OAUTH["LOGIN_URL"]) at your login view, or remove it to use '
                f'the app\'s own login page ("{LOGIN_URL_NAME}", /oauth/login).',
                id="mcp_oauth.W030",
            )
        ]
    template_name = _template_of(view)
    if not template_name:
        return []  # a function view: its template is not known ahead of a request
    problem = _render_problem(template_name, url)
    if problem:
        return [
            Error(
                f"The login page {url!r} cannot render its template {template_name!r}: {problem}",
                hint="Add the missing template (and the base template it extends) to a templates directory, "
                "or remove LOGIN_URL to use the app's own login page (mcp_oauth/login.html).",
                id="mcp_oauth.E031",
            )
        ]
    return []


def _login_view(url: str):
    try:
        return resolve(urlsplit(url).path).func
    except Resolver404:
        return None


def _template_of(view) -> str | None:
    """``template_name`` of a class-based view (through decorators that keep ``__wrapped__``)."""
    while not hasattr(view, "view_class") and hasattr(view, "__wrapped__"):
        view = view.__wrapped__
    view_class = getattr(view, "view_class", None)
    if view_class is None:
        return None
    return (getattr(view, "view_initkwargs", None) or {}).get("template_name") or getattr(
        view_class, "template_name", None
    )


def _render_problem(template_name: str, url: str) -> str | None:
    """Render ``template_name`` as a login page (without a request: no context processor runs)."""
    try:
        render_to_string(
            template_name,
            {"form": AuthenticationForm(), "next": "/", "site_host": "", "client_name": None, "csrf_token": "check"},
        )
    except Exception as exc:  # noqa: BLE001 - any failure is what a user would meet as a 500
        return f"{type(exc).__name__}: {exc}"
    return None


def check_trust_and_throttling(app_configs, **kwargs):
    """E030 unknown TRUST_MODE; W031 trust permission classes left out of OAUTH2_PROVIDER; E032 bad THROTTLE_RATES."""
    return [*trust_messages(), *throttling_messages()]


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


def check_assertion_algorithms(app_configs, **kwargs):
    """E090 ``ASSERTION_ALGORITHMS`` lists ``none`` or an HS* algorithm, or nothing usable: signed JWT
    assertions (``private_key_jwt``, ID-JAG) need asymmetric algorithms (RFC 8725 §3.1, §3.2). The
    forbidden ones are never accepted anyway; the error says the setting does not mean what it says."""
    configured = mcp_oauth_settings.ASSERTION_ALGORITHMS
    if not isinstance(configured, (list, tuple)) or isinstance(configured, str):
        configured = [configured]
    bad = [str(alg) for alg in configured if alg in FORBIDDEN_ALGORITHMS or alg not in KEY_TYPES]
    if not bad and configured:
        return []
    return [
        Error(
            'MCP_OAUTH["ASSERTION_ALGORITHMS"] must list asymmetric JWS algorithms only '
            f"({', '.join(sorted(KEY_TYPES))}); not accepted: {', '.join(bad) or 'an empty list'}.",
            id="mcp_oauth.E090",
        )
    ]


def check_key_set_limits(app_configs, **kwargs):
    """E097 ``JWKS_MAX_SIZE`` (bytes) or ``JWKS_MAX_KEYS`` is not a positive integer: every key set
    at a ``jwks_uri`` (clients', enterprise IdPs') would be refused or unbounded."""
    problems = [
        f'MCP_OAUTH["{key}"] must be a positive integer (got {value!r}).'
        for key in ("JWKS_MAX_SIZE", "JWKS_MAX_KEYS")
        for value in [getattr(mcp_oauth_settings, key)]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1
    ]
    return [Error(problem, id="mcp_oauth.E097") for problem in problems]


def check_client_secret_hasher(app_configs, **kwargs):
    """E050 ``OAUTH2_PROVIDER["CLIENT_SECRET_HASHER"]`` names a hasher missing from ``PASSWORD_HASHERS``:
    client secrets could be neither stored nor verified."""
    algorithm = oauth2_settings.CLIENT_SECRET_HASHER
    if not isinstance(algorithm, str) or algorithm == "default" or algorithm in get_hashers_by_algorithm():
        return []
    hint = f'Add "{HASHER_PATH}" to PASSWORD_HASHERS (after your password hasher).' if algorithm == ALGORITHM else None
    return [
        Error(
            f'OAUTH2_PROVIDER["CLIENT_SECRET_HASHER"] {algorithm!r} is not in PASSWORD_HASHERS.',
            hint=hint,
            id="mcp_oauth.E050",
        )
    ]


def check_fast_client_secret_hasher(app_configs, **kwargs):
    """W051 (deploy) client secrets are hashed with the site's password hasher (PBKDF2: ~180 ms of
    CPU per confidential-client grant) because the app's hasher is not in ``PASSWORD_HASHERS``."""
    if oauth2_settings.CLIENT_SECRET_HASHER != "default" or client_secret_hasher_listed():
        return []
    return [
        Warning(
            "Client secrets are hashed with the password hasher: every confidential-client grant "
            "costs a password-stretching hash.",
            hint=f'Add "{HASHER_PATH}" to PASSWORD_HASHERS, after your password hasher.',
            id="mcp_oauth.W051",
        )
    ]
