"""System checks (``manage.py check``): configuration that breaks or weakens the MCP profile.

Each role owns its checks (``<role>/checks.py``: :mod:`mcp_oauth.shared.checks`,
:mod:`mcp_oauth.dpop.checks`, :mod:`mcp_oauth.resource_server.checks`,
:mod:`mcp_oauth.mcp_server.checks`, :mod:`mcp_oauth.authorization_server.checks`); this
composition module registers them all, from one table (:data:`CHECKS`), with the checks that
span roles (the adapter, rotation and scopes; retention; probes and drain; the fleet's secrets). Importing it
registers them (:func:`mcp_oauth.wiring.wire` does, from ``ready()``). The check functions stay
importable from here.
"""

from __future__ import annotations

from django.core.checks import Error, Tags, register
from django.db import DatabaseError

from mcp_oauth.adapter import check_settings as adapter_messages
from mcp_oauth.authorization_server import checks as as_checks
from mcp_oauth.authorization_server.checks import (  # noqa: F401 - importable from here
    DOT_REDIRECT_SCHEME_CHECK_IDS,
    check_assertion_algorithms,
    check_cimd_test_setting,
    check_client_secret_hasher,
    check_dot_settings,
    check_fast_client_secret_hasher,
    check_key_set_limits,
    check_login_url,
    check_trust_and_throttling,
    dot_bcp_configuration,
    loopback_redirect_rule_in_force,
    replace_dot_bcp_check,
)
from mcp_oauth.authorization_server.tokens.rotation import MAX_GRACE_SECONDS, MAX_GRACE_SIBLINGS
from mcp_oauth.dpop import checks as dpop_checks
from mcp_oauth.dpop.checks import (  # noqa: F401 - importable from here
    check_dpop_settings,
)
from mcp_oauth.health import CHECKS as READINESS_CHECK_NAMES
from mcp_oauth.management.fleet import FleetConfigMismatch, check_fleet_config
from mcp_oauth.mcp_server import checks as mcp_checks
from mcp_oauth.mcp_server.checks import (  # noqa: F401 - importable from here
    check_admission_settings,
    check_folder_skills,
    check_request_state_keys,
    check_request_state_keys_set,
    check_resource_and_prompt_registries,
    check_tasks,
    check_tool_registry,
)
from mcp_oauth.resource_server import checks as rs_checks
from mcp_oauth.resource_server.checks import (  # noqa: F401 - importable from here
    check_decoded_token_entries,
    check_revocation_settings,
)
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared import checks as shared_checks
from mcp_oauth.shared.checks import (  # noqa: F401 - importable from here
    check_base_url,
    check_referrer_policy,
    check_task_queue,
    is_number,
)
from mcp_oauth.shared.scopes import check_settings as scope_messages


def check_rotation_and_scopes(app_configs, **kwargs):
    """E040 REFRESH_TOKEN_GRACE_SECONDS outside 0..300; E041 malformed SCOPE_HIERARCHY; E042 bad ADAPTER;
    E043 REFRESH_TOKEN_GRACE_SIBLINGS outside 0..1000; E048 SESSION_MAX_SECONDS neither None nor a positive integer."""
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
    cap = mcp_oauth_settings.SESSION_MAX_SECONDS
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
        messages.append(
            Error(
                'MCP_OAUTH["SESSION_MAX_SECONDS"] must be None (no cap) or a positive integer (seconds).',
                id="mcp_oauth.E048",
            )
        )
    return messages


#: The retention settings (mcp_oauth.retention): None, or a number of at least 0.
RETENTION_SETTINGS = (
    "AUDIT_RETENTION_DAYS",
    "AUDIT_IP_RETENTION_DAYS",
    "TASK_RETENTION_DAYS",
    "USED_ASSERTION_RETENTION_SECONDS",
    "CIMD_CACHE_RETENTION_DAYS",
    "TOOL_CALL_RETENTION_DAYS",
)


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


def check_probes_and_drain(app_configs, **kwargs):
    """E080 a probe or drain setting that would break the probes or the shutdown
    (:mod:`mcp_oauth.health`, :mod:`mcp_oauth.mcp_server.transport.drain`)."""
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
    if not is_number(mcp_oauth_settings.READINESS_CHECK_TIMEOUT_SECONDS, 0, above=True):
        problems.append('MCP_OAUTH["READINESS_CHECK_TIMEOUT_SECONDS"] must be a number of seconds above 0.')
    if not is_number(mcp_oauth_settings.DRAIN_DELAY_SECONDS, 0):
        problems.append('MCP_OAUTH["DRAIN_DELAY_SECONDS"] must be a number of seconds of at least 0.')
    retry = mcp_oauth_settings.DRAIN_RETRY_MILLISECONDS
    if not isinstance(retry, int) or isinstance(retry, bool) or retry < 0:
        problems.append('MCP_OAUTH["DRAIN_RETRY_MILLISECONDS"] must be an integer of at least 0.')
    return [Error(problem, id="mcp_oauth.E080") for problem in problems]


def check_fleet_secrets(app_configs, databases=None, **kwargs):
    """E140 this host's shared secrets do not fit the fleet's record in the database
    (:mod:`mcp_oauth.management.fleet`; compared only, nothing recorded). A database check: run by
    ``check --deploy --database default``; silent before the first ``migrate``."""
    if not databases or "default" not in databases:
        return []
    try:
        check_fleet_config(record=False)
    except FleetConfigMismatch as mismatch:
        return [
            Error(
                f"{setting}: {why}",
                hint="Give this host the fleet's keys (docs/how-to/many-hosts.md), or record a secret changed "
                "outright with manage.py check_fleet_config --replace.",
                id="mcp_oauth.E140",
            )
            for setting, why in mismatch.problems.items()
        ]
    except DatabaseError:
        return []  # not migrated yet: migrate, then the fleet is recorded at the first start
    return []


#: Every system check of the app: (function, tags, deploy only). Registered once, at import.
CHECKS = (
    (shared_checks.check_base_url, (Tags.security,), False),
    (as_checks.check_dot_settings, (Tags.security,), False),
    (mcp_checks.check_tool_registry, (), False),
    (mcp_checks.check_admission_settings, (), False),
    (mcp_checks.check_resource_and_prompt_registries, (Tags.urls, Tags.templates), False),
    (shared_checks.check_referrer_policy, (Tags.security,), False),
    (as_checks.check_login_url, (), False),
    (shared_checks.check_task_queue, (Tags.compatibility,), True),
    (as_checks.check_trust_and_throttling, (Tags.security,), False),
    (check_rotation_and_scopes, (), False),
    (as_checks.check_cimd_test_setting, (Tags.security,), False),
    (mcp_checks.check_request_state_keys, (Tags.security,), False),
    (mcp_checks.check_request_state_keys_set, (Tags.security,), True),
    (check_retention, (), False),
    (rs_checks.check_decoded_token_entries, (), False),
    (as_checks.check_assertion_algorithms, (Tags.security,), False),
    (as_checks.check_key_set_limits, (), False),
    (check_probes_and_drain, (), False),
    (as_checks.check_client_secret_hasher, (Tags.security,), False),
    (as_checks.check_fast_client_secret_hasher, (Tags.security,), True),
    (mcp_checks.check_tasks, (), False),
    (mcp_checks.check_apps_csp, (Tags.security,), False),
    (mcp_checks.check_folder_skills, (), False),
    (dpop_checks.check_dpop_settings, (Tags.security,), False),
    (rs_checks.check_revocation_settings, (), False),
    (check_fleet_secrets, (Tags.database, Tags.security), True),
    (rs_checks.check_jwt_access_token_settings, (Tags.security,), False),
    (rs_checks.check_jwt_access_token_keys, (Tags.database,), False),
)

for _check, _tags, _deploy in CHECKS:
    register(_check, *_tags, deploy=_deploy)
