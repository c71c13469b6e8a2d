"""The skills one request may see, and the lookups of the methods: by ``SKILL.md`` URI, by file
URI, by directory URI.

A skill is visible to a request when the token has the skill's scopes (``Skill.required_scopes``,
with ``SCOPE_HIERARCHY``), the request acts for one of the skill's organizations (when it names
any), and the adapter agrees (:meth:`mcp_oauth.adapter.DefaultMCPAdapter.skill_visible`). A
skill a request may not see is answered exactly like one that does not exist.

:func:`skills_offered` says whether the server has any skill at all (the extension and the
``resources`` capability are announced only then): the folder roots are looked at again at most
every few seconds, the database's answer is kept in the cache and replaced when a skill is saved
or deleted; an admin skill's change tells the clients (``notifications/resources/list_changed``,
once per transaction).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from typing import Any

from django.core.cache import cache
from django.core.signals import setting_changed
from django.db import DatabaseError, connections, transaction
from django.db.models.signals import m2m_changed, post_delete, post_migrate, post_save

from mcp_oauth.mcp_server.registry.base import missing_scopes
from mcp_oauth.mcp_server.registry.notify import notify_list_changed
from mcp_oauth.mcp_server.skills.sources import ServedSkill, SkillFileInfo, folder_skills, installed_skills
from mcp_oauth.models import Skill, SkillFile
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.skill_format import SKILL_MD, split_uri
from mcp_oauth.signals import skill_changed

__all__ = [
    "connect_receivers",
    "find_directory",
    "find_file",
    "find_skill",
    "prefix_children",
    "is_visible",
    "skills_offered",
    "visible_skills",
]

#: Cache key of "the database has an active skill".
DATABASE_FLAG_KEY = "mcp_oauth:skills:database"
#: Seconds a process keeps its answer to "the folders hold a skill".
FOLDER_RECHECK_SECONDS = 5.0
_folder_flag: tuple[float, bool] | None = None


def is_visible(ctx: Any, skill: ServedSkill) -> bool:
    """Whether the request ``ctx`` (a :class:`~mcp_oauth.mcp_server.registry.RequestContext`) may
    see ``skill`` (see the module docstring)."""
    if missing_scopes(skill.scopes, ctx.scopes):
        return False
    if skill.organizations:
        organization = ctx.organization
        if organization is None or organization.pk not in skill.organizations:
            return False
    return bool(mcp_oauth_settings.adapter.skill_visible(ctx, skill))


def visible_skills(ctx: Any) -> list[ServedSkill]:
    """The skills ``ctx`` may see, by path (sync: reads the folders and the database)."""
    return sorted((s for s in installed_skills() if is_visible(ctx, s)), key=lambda s: s.path)


def find_skill(ctx: Any, uri: str) -> ServedSkill | None:
    """The visible skill whose ``SKILL.md`` is at ``uri``, else None."""
    segments = split_uri(uri)
    if segments is None or len(segments) < 2 or segments[-1] != SKILL_MD:
        return None
    path = "/".join(segments[:-1])
    return next((s for s in visible_skills(ctx) if s.path == path), None)


def _split(ctx: Any, uri: str) -> tuple[ServedSkill, str] | None:
    """The visible skill holding ``uri`` (the deepest one: a nested skill's files are its own) and
    the path inside it (``""``: its root)."""
    segments = split_uri(uri)
    if segments is None:
        return None
    best: tuple[ServedSkill, str] | None = None
    for skill in visible_skills(ctx):
        prefix = skill.path.split("/")
        if segments[: len(prefix)] == prefix and (best is None or len(prefix) > len(best[0].path.split("/"))):
            best = (skill, "/".join(segments[len(prefix) :]))
    return best


def find_file(ctx: Any, uri: str) -> tuple[ServedSkill, SkillFileInfo] | None:
    """The visible skill and listed file at ``uri``, else None (an unlisted path is never looked up
    on disk: ``skill://x/../../settings.py`` names nothing)."""
    found = _split(ctx, uri)
    if found is None or not found[1]:
        return None
    skill, path = found
    info = skill.file(path)
    return (skill, info) if info is not None else None


def prefix_children(ctx: Any, uri: str) -> list[str] | None:
    """The next path segments below ``uri`` when it is a prefix directory of visible skills
    (``skill://acme`` above ``skill://acme/billing/refunds``), else None."""
    segments = split_uri(uri)
    if segments is None:
        return None
    found = {
        parts[len(segments)]
        for parts in (skill.path.split("/") for skill in visible_skills(ctx))
        if len(parts) > len(segments) and parts[: len(segments)] == segments
    }
    return sorted(found) if found else None


def find_directory(ctx: Any, uri: str) -> tuple[ServedSkill, str] | None:
    """The visible skill and the directory inside it (``""``: its root) at ``uri``, else None."""
    found = _split(ctx, uri)
    if found is None or found[1] not in found[0].directories():
        return None
    return found


# --- "is there any skill?" ----------------------------------------------------------------------


def _database_has_skills() -> bool:
    try:
        value = Skill.objects.filter(is_active=True).exists()
    except DatabaseError:  # not migrated yet: no skill, and nothing cached
        return False
    cache.set(DATABASE_FLAG_KEY, value, None)
    return value


def _in_worker(fn: Any) -> Any:
    try:
        return fn()
    finally:
        connections.close_all()  # the worker thread's own connections, not the caller's


def _outside_event_loop(fn: Any) -> Any:
    """``fn()``, in a worker thread when this thread runs an event loop (the ORM refuses to run there)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return fn()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_in_worker, fn).result()


def skills_offered() -> bool:
    """Whether any skill is installed, whoever may see it (capabilities are the same for every
    caller). Cheap: no database query unless the cache lost the flag."""
    global _folder_flag
    now = time.monotonic()
    if _folder_flag is None or now - _folder_flag[0] > FOLDER_RECHECK_SECONDS:
        _folder_flag = (now, bool(folder_skills()))
    if _folder_flag[1]:
        return True
    flag = cache.get(DATABASE_FLAG_KEY)
    if flag is None:
        flag = _outside_event_loop(_database_has_skills)
    return bool(flag)


def forget_folder_flag() -> None:
    """Look at the folders again on the next :func:`skills_offered` (tests, a deploy hook)."""
    global _folder_flag
    _folder_flag = None


def _database_changed(**kwargs: Any) -> None:
    cache.delete(DATABASE_FLAG_KEY)


def _send_list_changed() -> None:
    notify_list_changed("resources")


def _skills_changed(**kwargs: Any) -> None:
    """One ``notifications/resources/list_changed`` per transaction that changed skills, after it
    commits (to live 2025-11-25 sessions and opted-in 2026-07-28 listen streams); nothing when it
    rolls back."""
    connection = transaction.get_connection()
    if any(entry[1] is _send_list_changed for entry in connection.run_on_commit):
        return
    transaction.on_commit(_send_list_changed)


def _settings_changed(setting: str, **kwargs: Any) -> None:
    if setting == "MCP_OAUTH":
        forget_folder_flag()


def _flushed(**kwargs: Any) -> None:
    cache.delete(DATABASE_FLAG_KEY)


def connect_receivers() -> None:
    """Drop the cached database flag when a skill, its files or its organizations change, or the
    database is migrated or flushed; look at the folders again when ``MCP_OAUTH`` changes."""
    setting_changed.connect(_settings_changed, dispatch_uid="mcp_oauth.skills.settings")
    post_migrate.connect(_flushed, dispatch_uid="mcp_oauth.skills.migrated")
    for model in (Skill, SkillFile):
        post_save.connect(_database_changed, sender=model, dispatch_uid=f"mcp_oauth.skills.saved.{model.__name__}")
        post_delete.connect(_database_changed, sender=model, dispatch_uid=f"mcp_oauth.skills.deleted.{model.__name__}")
    m2m_changed.connect(
        _database_changed, sender=Skill.organizations.through, dispatch_uid="mcp_oauth.skills.organizations"
    )
    skill_changed.connect(_skills_changed, sender=Skill, dispatch_uid="mcp_oauth.skills.changed")
    post_save.connect(_skills_changed, sender=Skill, dispatch_uid="mcp_oauth.skills.saved.notify")
    post_delete.connect(_skills_changed, sender=Skill, dispatch_uid="mcp_oauth.skills.deleted.notify")
