"""System checks (``manage.py check``): configuration that breaks or weakens the MCP profile."""

from __future__ import annotations

import os
from importlib.util import find_spec
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.hashers import get_hashers_by_algorithm
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.core.checks.registry import registry as check_registry
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, Resolver404, resolve
from oauth2_provider.checks import validate_bcp_configuration
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.adapter import check_settings as adapter_messages
from mcp_oauth.authorization_server.assertions import FORBIDDEN_ALGORITHMS, KEY_TYPES
from mcp_oauth.authorization_server.client_secrets import ALGORITHM, HASHER_PATH
from mcp_oauth.authorization_server.login import LOGIN_URL_NAME, login_url
from mcp_oauth.authorization_server.rotation import MAX_GRACE_SECONDS, MAX_GRACE_SIBLINGS
from mcp_oauth.authorization_server.trust import check_settings as trust_messages
from mcp_oauth.authorization_server.validator import MCPOAuth2Validator
from mcp_oauth.dpop.proof import ASYMMETRIC_ALGORITHMS
from mcp_oauth.health import CHECKS as READINESS_CHECK_NAMES
from mcp_oauth.mcp_server.registry.prompts import PromptRegistry
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry
from mcp_oauth.mcp_server.tools import ToolRegistry
from mcp_oauth.resource_server.revocation import is_local
from mcp_oauth.settings import DOT_SECURITY_KEYS, mcp_oauth_settings
from mcp_oauth.shared.scopes import check_settings as scope_messages
from mcp_oauth.shared.taskqueue import celery_configured
from mcp_oauth.shared.throttling import check_settings as throttling_messages


@register(Tags.security)
def check_base_url(app_configs, **kwargs):
    """E001 BASE_URL missing or malformed; W002 http on a non-loopback host; E003 issuer with a trailing slash."""
    messages: list[CheckMessage] = []
    base = mcp_oauth_settings.BASE_URL
    if not base:
        return [
            Error(
                'MCP_OAUTH["BASE_URL"] is not set.',
                hint='Set it to the site\'s public origin, e.g. "https://mcp.example.com".',
                id="mcp_oauth.E001",
            )
        ]
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


@register()
def check_tool_registry(app_configs, **kwargs):
    """E020 ``TOOL_REGISTRY`` does not import, or is not a ToolRegistry."""
    path = mcp_oauth_settings.configured("TOOL_REGISTRY")
    try:
        registry = mcp_oauth_settings.TOOL_REGISTRY
    except ImportError as exc:
        return [
            Error(
                f'MCP_OAUTH["TOOL_REGISTRY"] {path!r} cannot be imported: {exc.__cause__ or exc}', id="mcp_oauth.E020"
            )
        ]
    if not isinstance(registry, ToolRegistry):
        return [Error(f'MCP_OAUTH["TOOL_REGISTRY"] {path!r} is not a ToolRegistry.', id="mcp_oauth.E020")]
    return []


@register()
def check_tool_modules(app_configs, **kwargs):
    """W021 a module named in ``TOOL_MODULES`` does not exist (its tools are not served)."""
    messages: list[CheckMessage] = []
    for module in mcp_oauth_settings.TOOL_MODULES:
        try:
            found = find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            messages.append(
                Warning(
                    f'MCP_OAUTH["TOOL_MODULES"] names {module!r}, which does not exist: its tools are not served.',
                    hint="Create the module, or fix its dotted name.",
                    id="mcp_oauth.W021",
                )
            )
    return messages


@register(Tags.urls, Tags.templates)
def check_resource_and_prompt_registries(app_configs, **kwargs):
    """E023 ``RESOURCE_REGISTRY`` / E024 ``PROMPT_REGISTRY`` does not import, or is not a registry."""
    messages = []
    for key, kind, code in (
        ("RESOURCE_REGISTRY", ResourceRegistry, "E023"),
        ("PROMPT_REGISTRY", PromptRegistry, "E024"),
    ):
        path = mcp_oauth_settings.configured(key)
        try:
            registry = getattr(mcp_oauth_settings, key)
        except ImportError as exc:
            messages.append(
                Error(f'MCP_OAUTH["{key}"] {path!r} cannot be imported: {exc.__cause__ or exc}', id=f"mcp_oauth.{code}")
            )
            continue
        if not isinstance(registry, kind):
            messages.append(Error(f'MCP_OAUTH["{key}"] {path!r} is not a {kind.__name__}.', id=f"mcp_oauth.{code}"))
    return messages


@register(Tags.security)
def check_referrer_policy(app_configs, **kwargs):
    """W032 ``SECURE_REFERRER_POLICY`` includes ``no-referrer``: browsers then send ``Origin: null``
    on the form POSTs of the site's own pages (WHATWG Fetch, "serialize a request origin"), and
    Django's CSRF check refuses them, so nobody can sign in on the site's login page to approve a
    client. The app's own pages send ``same-origin`` whatever the site's setting."""
    policy = getattr(settings, "SECURE_REFERRER_POLICY", None)
    values = [policy] if isinstance(policy, str) else list(policy or [])
    names = {part.strip().lower() for value in values for part in str(value).split(",")}
    if "no-referrer" not in names:
        return []
    return [
        Warning(
            "SECURE_REFERRER_POLICY is 'no-referrer': browsers send 'Origin: null' on form POSTs and Django's "
            "CSRF check refuses them (the site's login page among them).",
            hint='Use "same-origin": no URL (authorization request, code, elicitation id) reaches another site, '
            "and form POSTs carry their real Origin.",
            id="mcp_oauth.W032",
        )
    ]


@register()
def check_login_url(app_configs, **kwargs):
    """W030 the login page users are sent to (:func:`mcp_oauth.authorization_server.login.login_url`) resolves to no view;
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


@register(Tags.compatibility, deploy=True)
def check_task_queue(app_configs, **kwargs):
    """W050 (deploy) no Celery app: tasks run in-process, and the periodic tasks run only if scheduled elsewhere."""
    if celery_configured():
        return []
    return [
        Warning(
            "No Celery app is configured: the app's tasks run in-process (CIMD fetches, elicitation "
            "notifications), and its periodic tasks (mcp_oauth.tasks.cleanup, mcp_oauth.tasks.prune_dynamic_clients, "
            "mcp_oauth.tasks.prune_refresh_generations, mcp_oauth.mcp_tasks.reconcile, "
            "elicitation.tasks.reconcile_completion_notifications, elicitation.tasks.expire_elicitations, "
            "elicitation.tasks.cleanup) never run: nothing is pruned (the retention settings are not applied).",
            hint="Give the site a Celery app and beat schedule (see project/celery.py and CELERY_BEAT_SCHEDULE of "
            "django-mcp-authz), or call those tasks from your own scheduler.",
            id="mcp_oauth.W050",
        )
    ]


@register(Tags.security)
def check_trust_and_throttling(app_configs, **kwargs):
    """E030 unknown TRUST_MODE; W031 trust permission classes left out of OAUTH2_PROVIDER; E032 bad THROTTLE_RATES."""
    return [*trust_messages(), *throttling_messages()]


@register()
def check_rotation_and_scopes(app_configs, **kwargs):
    """E040 REFRESH_TOKEN_GRACE_SECONDS outside 0..300; E041 malformed SCOPE_HIERARCHY; E042 bad ADAPTER;
    E043 REFRESH_TOKEN_GRACE_SIBLINGS outside 0..1000."""
    messages = scope_messages() + adapter_messages()
    grace = mcp_oauth_settings.REFRESH_TOKEN_GRACE_SECONDS
    if not isinstance(grace, int) or isinstance(grace, bool) or not 0 <= grace <= MAX_GRACE_SECONDS:
        messages.append(
            Error(
                f'MCP_OAUTH["REFRESH_TOKEN_GRACE_SECONDS"] must be an integer from 0 to {MAX_GRACE_SECONDS} (seconds).',
                id="mcp_oauth.E040",
            )
        )
    siblings = mcp_oauth_settings.REFRESH_TOKEN_GRACE_SIBLINGS
    if not isinstance(siblings, int) or isinstance(siblings, bool) or not 0 <= siblings <= MAX_GRACE_SIBLINGS:
        messages.append(
            Error(
                f'MCP_OAUTH["REFRESH_TOKEN_GRACE_SIBLINGS"] must be an integer from 0 to {MAX_GRACE_SIBLINGS}.',
                id="mcp_oauth.E043",
            )
        )
    return messages


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
    """E060 a ``REQUEST_STATE_KEYS`` entry is not a secret of at least 32 characters (or bytes)."""
    keys = mcp_oauth_settings.REQUEST_STATE_KEYS
    if keys and (isinstance(keys, (str, bytes)) or not all(isinstance(k, (str, bytes)) and len(k) >= 32 for k in keys)):
        return [
            Error(
                'MCP_OAUTH["REQUEST_STATE_KEYS"] must be a list of secrets of at least 32 characters each.',
                hint='e.g. [os.environ["MCP_REQUEST_STATE_KEY"]], generated with python -c "import secrets; print(secrets.token_urlsafe(48))"',
                id="mcp_oauth.E060",
            )
        ]
    return []


@register(Tags.security, deploy=True)
def check_request_state_keys_set(app_configs, **kwargs):
    """W060 (deploy) no keys: ``requestState`` (MCP 2026-07-28) is sealed with a key derived from
    SECRET_KEY (fine for one process in development; workers need the same keys, and rotating
    SECRET_KEY would void pending multi-round-trip requests)."""
    if mcp_oauth_settings.REQUEST_STATE_KEYS:
        return []
    return [
        Warning(
            'MCP_OAUTH["REQUEST_STATE_KEYS"] is not set: requestState is sealed with a key derived from SECRET_KEY.',
            hint="Set a list of random secrets (newest first) shared by every worker, so that rotating "
            "SECRET_KEY does not invalidate pending multi-round-trip requests and keys can rotate on their own.",
            id="mcp_oauth.W060",
        )
    ]


#: The retention settings (mcp_oauth.retention): None, or a number of at least 0.
RETENTION_SETTINGS = (
    "AUDIT_RETENTION_DAYS",
    "AUDIT_IP_RETENTION_DAYS",
    "TASK_RETENTION_DAYS",
    "USED_ASSERTION_RETENTION_SECONDS",
    "CIMD_CACHE_RETENTION_DAYS",
    "TOOL_CALL_RETENTION_DAYS",
)


@register()
def check_retention(app_configs, **kwargs):
    """E120 a retention setting is neither ``None`` nor a number of at least 0 (the periodic cleanup
    would fail on it, and the table would grow)."""
    errors = []
    for key in RETENTION_SETTINGS:
        value = getattr(mcp_oauth_settings, key)
        if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0):
            continue
        errors.append(
            Error(
                f'MCP_OAUTH["{key}"] must be None (keep) or a number of at least 0 (got {value!r}).',
                id="mcp_oauth.E120",
            )
        )
    return errors


@register()
def check_decoded_token_entries(app_configs, **kwargs):
    """E070 ``DECODED_TOKEN_ENTRIES`` is not a non-negative integer (the bearer check of every
    request would fail on it)."""
    size = mcp_oauth_settings.DECODED_TOKEN_ENTRIES
    if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
        return []
    return [
        Error(
            'MCP_OAUTH["DECODED_TOKEN_ENTRIES"] must be an integer of at least 0 (0: keep none).',
            id="mcp_oauth.E070",
        )
    ]


@register(Tags.security)
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


@register()
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


def _is_number(value, minimum: float, above: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return value > minimum if above else value >= minimum


@register()
def check_probes_and_drain(app_configs, **kwargs):
    """E080 a probe or drain setting that would break the probes or the shutdown
    (:mod:`mcp_oauth.health`, :mod:`mcp_oauth.mcp_server.drain`)."""
    problems = []
    paths: dict[str, str] = {}
    for key in ("LIVENESS_PATH", "READINESS_PATH"):
        path = getattr(mcp_oauth_settings, key)
        if path is None:
            continue
        if not isinstance(path, str) or not path.startswith("/"):
            problems.append(f'MCP_OAUTH["{key}"] must be None or a path starting with "/" (got {path!r}).')
        elif path.rstrip("/") == str(mcp_oauth_settings.MCP_PATH).rstrip("/") or path in paths.values():
            problems.append(f'MCP_OAUTH["{key}"] ({path!r}) must differ from MCP_PATH and from the other probe.')
        paths[key] = path
    names = mcp_oauth_settings.READINESS_CHECKS
    if not isinstance(names, (list, tuple)) or any(name not in READINESS_CHECK_NAMES for name in names):
        known = ", ".join(READINESS_CHECK_NAMES)
        problems.append(f'MCP_OAUTH["READINESS_CHECKS"] must be a list of check names among: {known} (got {names!r}).')
    if not _is_number(mcp_oauth_settings.READINESS_CHECK_TIMEOUT_SECONDS, 0, above=True):
        problems.append('MCP_OAUTH["READINESS_CHECK_TIMEOUT_SECONDS"] must be a number of seconds above 0.')
    if not _is_number(mcp_oauth_settings.DRAIN_DELAY_SECONDS, 0):
        problems.append('MCP_OAUTH["DRAIN_DELAY_SECONDS"] must be a number of seconds of at least 0.')
    retry = mcp_oauth_settings.DRAIN_RETRY_MILLISECONDS
    if not isinstance(retry, int) or isinstance(retry, bool) or retry < 0:
        problems.append('MCP_OAUTH["DRAIN_RETRY_MILLISECONDS"] must be an integer of at least 0.')
    return [Error(problem, id="mcp_oauth.E080") for problem in problems]


@register(Tags.security)
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


@register(Tags.security, deploy=True)
def check_fast_client_secret_hasher(app_configs, **kwargs):
    """W051 (deploy) client secrets are hashed with the site's password hasher (PBKDF2: ~180 ms of
    CPU per confidential-client grant) because the app's hasher is not in ``PASSWORD_HASHERS``."""
    if oauth2_settings.CLIENT_SECRET_HASHER != "default" or HASHER_PATH in settings.PASSWORD_HASHERS:
        return []
    return [
        Warning(
            "Client secrets are hashed with the password hasher: every confidential-client grant "
            "costs a password-stretching hash.",
            hint=f'Add "{HASHER_PATH}" to PASSWORD_HASHERS, after your password hasher.',
            id="mcp_oauth.W051",
        )
    ]


@register()
def check_tasks(app_configs, **kwargs):
    """E092 a Tasks-extension setting out of range (:mod:`mcp_oauth.mcp_server.mcp_tasks`); E093 a tool keeps
    its task results encrypted but ``TASKS_RESULT_CIPHER`` does not import as an object with
    ``encrypt``/``decrypt``."""
    s = mcp_oauth_settings
    problems = []
    if s.TASKS_EXECUTOR not in (None, "celery", "thread"):
        problems.append(f'MCP_OAUTH["TASKS_EXECUTOR"] must be None, "celery" or "thread" (got {s.TASKS_EXECUTOR!r}).')
    ttl = s.TASKS_TTL_MS
    if ttl is not None and (not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0):
        problems.append('MCP_OAUTH["TASKS_TTL_MS"] must be None or a positive integer of milliseconds.')
    poll = s.TASKS_POLL_INTERVAL_MS
    if not isinstance(poll, int) or isinstance(poll, bool) or poll <= 0:
        problems.append('MCP_OAUTH["TASKS_POLL_INTERVAL_MS"] must be a positive integer of milliseconds.')
    for key in (
        "TASKS_HEARTBEAT_SECONDS",
        "TASKS_LEASE_SECONDS",
        "TASKS_CANCEL_POLL_SECONDS",
        "TASKS_QUEUE_GRACE_SECONDS",
    ):
        if not _is_number(getattr(s, key), 0, above=True):
            problems.append(f'MCP_OAUTH["{key}"] must be a number of seconds above 0.')
    if not problems and s.TASKS_LEASE_SECONDS < 2 * s.TASKS_HEARTBEAT_SECONDS:
        problems.append('MCP_OAUTH["TASKS_LEASE_SECONDS"] must be at least twice TASKS_HEARTBEAT_SECONDS.')
    errors = [Error(problem, id="mcp_oauth.E092") for problem in problems]
    try:
        tools = list(s.TOOL_REGISTRY.list())
    except Exception:  # noqa: BLE001 - reported by the registry's own check
        tools = []
    sealed = [tool.name for tool in tools if getattr(getattr(tool, "task", None), "encrypt_result", False)]
    if sealed:
        try:
            cipher = s.TASKS_RESULT_CIPHER
            usable = callable(getattr(cipher, "encrypt", None)) and callable(getattr(cipher, "decrypt", None))
        except ImportError:
            usable = False
        if not usable:
            errors.append(
                Error(
                    f"Tools {', '.join(sealed)} keep task results encrypted, but "
                    'MCP_OAUTH["TASKS_RESULT_CIPHER"] is not an importable object with encrypt() and decrypt().',
                    id="mcp_oauth.E093",
                )
            )
    return errors


@register(Tags.security)
def check_dpop_settings(app_configs, **kwargs):
    """E095 a DPoP setting the proof check cannot use (RFC 9449; :mod:`mcp_oauth.dpop`): an algorithm
    that is not an asymmetric JWS one, a proof window or a nonce lifetime that is not a positive number."""
    errors = []
    algorithms = mcp_oauth_settings.DPOP_SIGNING_ALG_VALUES_SUPPORTED
    if not isinstance(algorithms, (list, tuple)) or any(alg not in ASYMMETRIC_ALGORITHMS for alg in algorithms):
        errors.append(
            Error(
                'MCP_OAUTH["DPOP_SIGNING_ALG_VALUES_SUPPORTED"] must list asymmetric JWS algorithms only, out of: '
                + " ".join(ASYMMETRIC_ALGORITHMS)
                + " ([] switches DPoP off).",
                id="mcp_oauth.E095",
            )
        )
    for name, minimum in (
        ("DPOP_PROOF_MAX_AGE_SECONDS", 1),
        ("DPOP_PROOF_LEEWAY_SECONDS", 0),
        ("DPOP_NONCE_LIFETIME_SECONDS", 1),
    ):
        value = getattr(mcp_oauth_settings, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            errors.append(Error(f'MCP_OAUTH["{name}"] must be an integer of at least {minimum}.', id="mcp_oauth.E095"))
    return errors


def _multi_process_signs() -> list[str]:
    """What says that this site runs in more than one process besides management commands."""
    signs = []
    if settings.DATABASES.get("default", {}).get("ENGINE", "").endswith(("postgresql", "mysql", "oracle")):
        signs.append("a database server (several processes or hosts can reach it)")
    if getattr(settings, "CELERY_BROKER_URL", None) and not getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False):
        signs.append("a Celery broker (tasks run in worker processes)")
    if mcp_oauth_settings.WAKEUP_URL:
        signs.append('MCP_OAUTH["WAKEUP_URL"] (wake-ups between processes)')
    for name in ("WEB_CONCURRENCY", "WORKERS"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 1:
            signs.append(f"{name}={value}")
    return signs


@register()
def check_revocation_settings(app_configs, **kwargs):
    """E071 ``REVOCATION_CHECK_SECONDS`` is not a number of at least 0, or ``TOKEN_CACHE_SHARED``
    is not None, True or False. W071 the token cache is not shared between processes
    (``LocMemCache``, or ``TOKEN_CACHE_SHARED`` False) in a site that looks multi-process:
    changes made by another process are honoured within ``REVOCATION_CHECK_SECONDS`` (the
    revocation stamp, :mod:`mcp_oauth.resource_server.revocation`), not at once."""
    messages: list[CheckMessage] = []
    interval = mcp_oauth_settings.REVOCATION_CHECK_SECONDS
    if not _is_number(interval, 0):
        messages.append(
            Error('MCP_OAUTH["REVOCATION_CHECK_SECONDS"] must be a number of at least 0.', id="mcp_oauth.E071")
        )
    if mcp_oauth_settings.TOKEN_CACHE_SHARED not in (None, True, False):
        messages.append(Error('MCP_OAUTH["TOKEN_CACHE_SHARED"] must be None, True or False.', id="mcp_oauth.E071"))
    if messages or not is_local():
        return messages
    signs = _multi_process_signs()
    if signs:
        messages.append(
            Warning(
                f'MCP_OAUTH["TOKEN_CACHE"] ({mcp_oauth_settings.TOKEN_CACHE!r}) is a cache of each process\'s own, '
                f"and this site looks multi-process ({'; '.join(signs)}).",
                hint=(
                    "A revocation, deletion or deactivation made by another process (a worker, a Celery task, "
                    "manage.py) reaches this one through the database's revocation stamp, re-read at most every "
                    f"REVOCATION_CHECK_SECONDS ({interval} s): one query per process per interval, and every "
                    "cached token looked up again after each change anywhere. Point TOKEN_CACHE at a cache all "
                    "processes share (Redis) for revocation at once and no stamp queries, or silence "
                    "mcp_oauth.W071 (SILENCED_SYSTEM_CHECKS) to keep this trade-off."
                ),
                id="mcp_oauth.W071",
            )
        )
    return messages
