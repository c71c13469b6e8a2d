"""System checks of the MCP server (``manage.py check``): the tool, resource and prompt registries,
``TOOL_MODULES``, the ``requestState`` keys, the Tasks extension's settings, the MCP Apps CSP setting,
the folder skills.

Registered, with every role's, by :mod:`mcp_oauth.checks`."""

from __future__ import annotations

from django.core.checks import Error, Warning

from mcp_oauth.mcp_server.mcp_apps.views import check_csp
from mcp_oauth.mcp_server.registry.prompts import PromptRegistry
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry
from mcp_oauth.mcp_server.skills.sources import folder_skills
from mcp_oauth.mcp_server.tools import ToolRegistry
from mcp_oauth.mcp_server.transport.admission import check_settings as admission_messages
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.checks import is_number


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
        if not is_number(getattr(s, key), 0, above=True):
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


def check_admission_settings(app_configs, **kwargs):
    """E098 a load-shedding or per-client rate-limit setting out of shape (:mod:`mcp_oauth.mcp_server.transport.admission`)."""
    return admission_messages()


def check_apps_csp(app_configs, **kwargs):
    """E150 ``APPS_CSP`` is not a mapping of ``ui://`` URIs to CSP objects of origins
    (:mod:`mcp_oauth.mcp_server.mcp_apps`)."""
    configured = mcp_oauth_settings.APPS_CSP
    if configured is None:
        return []
    if not isinstance(configured, dict):
        return [Error('MCP_OAUTH["APPS_CSP"] must be a dict of ui:// URIs to CSP objects.', id="mcp_oauth.E150")]
    messages = []
    for uri, csp in configured.items():
        if not isinstance(uri, str) or not uri.startswith("ui://"):
            messages.append(Error(f'MCP_OAUTH["APPS_CSP"]: key {uri!r} is not a ui:// URI.', id="mcp_oauth.E150"))
            continue
        try:
            check_csp(csp, f'MCP_OAUTH["APPS_CSP"][{uri!r}]')
        except ValueError as exc:
            messages.append(Error(str(exc), id="mcp_oauth.E150"))
    return messages


def check_folder_skills(app_configs, **kwargs):
    """W151 a folder skill is not served (broken format, over the limits, shadowed by another at
    the same path); E151 ``SKILL_DIRS`` is not a list of paths."""
    dirs = mcp_oauth_settings.SKILL_DIRS
    if not isinstance(dirs, (list, tuple)) or not all(isinstance(d, str) for d in dirs):
        return [Error('MCP_OAUTH["SKILL_DIRS"] must be a list of folder paths.', id="mcp_oauth.E151")]
    problems: list[str] = []
    served: set[str] = set()
    for skill in folder_skills(problems):
        if skill.path in served:
            problems.append(f"{skill.directory}: shadowed by an earlier skill at the path {skill.path!r}")
        served.add(skill.path)
    return [Warning(f"Skill not served: {problem}", id="mcp_oauth.W151") for problem in problems]
