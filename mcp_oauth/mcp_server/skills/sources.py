"""Where skills come from: folders (each installed app's ``mcp_skills/``, then ``MCP_OAUTH["SKILL_DIRS"]``)
and the database (:class:`mcp_oauth.models.Skill`, managed in the admin).

A **folder skill** is a directory holding a ``SKILL.md``, found under a skills root like a template
under ``templates/``: ``<app>/mcp_skills/git-workflow/SKILL.md`` is the skill ``git-workflow``,
``<app>/mcp_skills/acme/refunds/SKILL.md`` the skill ``acme/refunds``. Every regular file under
the skill's directory is one of its files, except names starting with ``.`` and ``__pycache__``;
symbolic links are not followed (a link cannot pull a file from outside the root into a skill).

Sizes come from ``stat``; each file's SHA-256 digest is computed once and kept per process, keyed
by the file's ``(st_mtime_ns, st_size, st_ino)``: an edited file is hashed again on the next
listing, an unchanged one never. A database skill's digests are columns computed when its file is
saved.

Roots come first to last: ``SKILL_DIRS``, the apps in ``INSTALLED_APPS`` order, then the database;
the first skill at a given path wins (later folder ones are reported by the system
check ``mcp_oauth.W151``). A skill that breaks the format (no front matter, a name that is not its last
path segment) or the SEP-2640 limits (``SKILL_MAX_FILES`` files, ``SKILL_MAX_BYTES`` bytes) is not
served and, for a folder skill, is reported by ``mcp_oauth.W151``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.apps import apps
from django.db.models import Prefetch

from mcp_oauth.models import Skill, SkillFile
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.skill_format import (
    SKILL_MD,
    InvalidSkill,
    check_file_path,
    check_skill_path,
    digest,
    mime_type,
    parse_front_matter,
    skill_uri,
)

__all__ = ["ServedSkill", "SkillFileInfo", "database_skills", "folder_roots", "folder_skills", "installed_skills"]

logger = logging.getLogger("mcp_oauth.skills")


@dataclass(frozen=True)
class SkillFileInfo:
    """One file of a skill: ``path`` inside the skill (``/`` separated), ``size`` in bytes,
    ``digest`` (``sha256:<hex>``) and ``mime_type``."""

    path: str
    size: int
    digest: str
    mime_type: str


@dataclass(frozen=True)
class ServedSkill:
    """A skill as served: its ``path`` (``acme/refunds``), verbatim ``front_matter``, ``files``
    (``SKILL.md`` first, then by path), where it comes from (``origin``: ``"folder"`` with
    ``directory``, or ``"database"`` with ``pk`` and ``version``) and who may see it (``scopes``,
    ``organizations``: primary keys, empty for every organization)."""

    path: str
    front_matter: dict[str, Any]
    files: tuple[SkillFileInfo, ...]
    origin: str
    directory: Path | None = None
    pk: int | None = None
    version: int | None = None
    scopes: tuple[str, ...] = ()
    organizations: frozenset[int] = field(default_factory=frozenset)

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def uri(self) -> str:
        """``skill://<path>/SKILL.md``."""
        return skill_uri(self.path)

    @property
    def description(self) -> str:
        return str(self.front_matter.get("description", ""))

    def file(self, path: str) -> SkillFileInfo | None:
        for info in self.files:
            if info.path == path:
                return info
        return None

    def directories(self) -> set[str]:
        """Every directory inside the skill, ``""`` for its root."""
        found = {""}
        for info in self.files:
            parts = info.path.split("/")[:-1]
            found.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        return found

    def read(self, path: str) -> bytes | None:
        """The bytes of the listed file ``path`` (None when it is not listed or is gone). Only a
        listed path is ever opened, so no URI reaches a file outside the skill."""
        info = self.file(path)
        if info is None:
            return None
        limit = int(mcp_oauth_settings.SKILL_MAX_BYTES)
        if self.origin == "database":
            content = (
                SkillFile.objects.filter(skill_id=int(self.pk or 0), path=path)
                .values_list("content", flat=True)
                .first()
            )
            return None if content is None else bytes(content)[: limit + 1]
        assert self.directory is not None
        target = self.directory.joinpath(*path.split("/"))
        try:
            with open(target, "rb", opener=_no_follow) as handle:
                return handle.read(limit + 1)
        except OSError:
            return None


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0))


# --- folders ------------------------------------------------------------------------------------

_digests: dict[str, tuple[tuple[int, int, int], str]] = {}
_fronts: dict[str, dict[str, Any] | InvalidSkill] = {}
_lock = threading.Lock()


def folder_roots() -> list[Path]:
    """The skills roots: ``SKILL_DIRS``, then ``<app>/<SKILLS_DIR_NAME>/`` of each installed app
    that has one."""
    roots = [Path(p) for p in mcp_oauth_settings.SKILL_DIRS]
    name = mcp_oauth_settings.SKILLS_DIR_NAME
    if name:
        roots += [Path(config.path) / name for config in apps.get_app_configs()]
    return [root for root in roots if root.is_dir()]


def _file_digest(path: str, stat: os.stat_result) -> str:
    key = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    with _lock:
        known = _digests.get(path)
    if known is not None and known[0] == key:
        return known[1]
    with open(path, "rb", opener=_no_follow) as handle:
        value = digest(handle.read())
    with _lock:
        _digests[path] = (key, value)
    return value


def _walk_files(directory: Path) -> Iterator[tuple[str, str, os.stat_result]]:
    """``(relative path, absolute path, stat)`` of the regular files under ``directory``, sorted."""
    stack = [("", str(directory))]
    while stack:
        relative, absolute = stack.pop()
        with os.scandir(absolute) as entries:
            for entry in sorted(entries, key=lambda e: e.name, reverse=True):
                if entry.name.startswith(".") or entry.name == "__pycache__" or entry.is_symlink():
                    continue
                child = f"{relative}/{entry.name}" if relative else entry.name
                if entry.is_dir(follow_symlinks=False):
                    stack.append((child, entry.path))
                elif entry.is_file(follow_symlinks=False):
                    yield child, entry.path, entry.stat(follow_symlinks=False)


def _check_limits(count: int, total: int) -> None:
    if count > int(mcp_oauth_settings.SKILL_MAX_FILES):
        raise InvalidSkill(f"more than {mcp_oauth_settings.SKILL_MAX_FILES} files (SKILL_MAX_FILES)")
    if total > int(mcp_oauth_settings.SKILL_MAX_BYTES):
        raise InvalidSkill(f"more than {mcp_oauth_settings.SKILL_MAX_BYTES} bytes in all (SKILL_MAX_BYTES)")


def _front_matter(skill_md: SkillFileInfo, read: Any) -> dict[str, Any]:
    with _lock:
        known = _fronts.get(skill_md.digest)
    if known is None:
        try:
            known = parse_front_matter(read())
        except InvalidSkill as exc:
            known = exc
        with _lock:
            _fronts[skill_md.digest] = known
    if isinstance(known, InvalidSkill):
        raise known
    return known


def _folder_skill(path: str, directory: Path) -> ServedSkill:
    """The skill in ``directory``. :raises InvalidSkill | OSError:"""
    check_skill_path(path)
    infos: list[SkillFileInfo] = []
    total = 0
    for relative, absolute, stat in _walk_files(directory):
        total += stat.st_size
        _check_limits(len(infos) + 1, total)  # before hashing: a huge file is never read
        check_file_path(relative)
        infos.append(SkillFileInfo(relative, stat.st_size, _file_digest(absolute, stat), mime_type(relative)))
    skill_md = next((info for info in infos if info.path == SKILL_MD), None)
    if skill_md is None:
        raise InvalidSkill("no SKILL.md")
    front = _front_matter(skill_md, lambda: (directory / SKILL_MD).read_bytes())
    if front["name"] != path.rsplit("/", 1)[-1]:
        raise InvalidSkill(f"front matter name {front['name']!r} is not the last segment of the skill path {path!r}")
    ordered = (skill_md, *sorted((i for i in infos if i is not skill_md), key=lambda i: i.path))
    return ServedSkill(path=path, front_matter=front, files=ordered, origin="folder", directory=directory)


def folder_skills(problems: list[str] | None = None) -> list[ServedSkill]:
    """Every valid folder skill, roots in order (see the module docstring); the reason each invalid
    one is skipped goes to ``problems`` (and the log)."""
    found: list[ServedSkill] = []
    for root in folder_roots():
        for directory, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
            if SKILL_MD not in filenames:
                continue
            path = Path(directory).relative_to(root).as_posix()
            try:
                found.append(_folder_skill(path, Path(directory)))
            except (InvalidSkill, OSError) as exc:
                message = f"{directory}: {exc}"
                logger.warning("skill not served: %s", message)
                if problems is not None:
                    problems.append(message)
    return found


# --- database -----------------------------------------------------------------------------------


def _database_skill(row: Skill) -> ServedSkill:
    """:raises InvalidSkill:"""
    check_skill_path(row.path)
    files = list(row.files.all())
    _check_limits(len(files), sum(f.size for f in files))
    infos = [SkillFileInfo(f.path, f.size, f.digest, mime_type(f.path)) for f in files]
    skill_md = next((info for info in infos if info.path == SKILL_MD), None)
    if skill_md is None:
        raise InvalidSkill("no SKILL.md")
    front = row.front_matter or {}
    if front.get("name") != row.name or not isinstance(front.get("description"), str):
        raise InvalidSkill(f"SKILL.md front matter has no name {row.name!r} and a description")
    ordered = (skill_md, *sorted((i for i in infos if i is not skill_md), key=lambda i: i.path))
    return ServedSkill(
        path=row.path,
        front_matter=dict(front),
        files=ordered,
        origin="database",
        pk=row.pk,
        version=row.version,
        scopes=tuple(row.scope_list),
        organizations=frozenset(org.pk for org in row.organizations.all()),
    )


def database_skills(problems: list[str] | None = None) -> list[ServedSkill]:
    """Every active, valid database skill (three queries: skills, their files without the
    content, their organizations)."""
    rows = Skill.objects.filter(is_active=True).prefetch_related(
        Prefetch("files", queryset=SkillFile.objects.defer("content").order_by("path")), "organizations"
    )
    found = []
    for row in rows:
        try:
            found.append(_database_skill(row))
        except InvalidSkill as exc:
            if problems is not None:
                problems.append(f"skill {row.path!r} (admin): {exc}")
    return found


def installed_skills(problems: list[str] | None = None) -> list[ServedSkill]:
    """Folder skills then database skills, the first at each path (later duplicates go to
    ``problems``)."""
    served: dict[str, ServedSkill] = {}
    for skill in [*folder_skills(problems), *database_skills(problems)]:
        if skill.path in served:
            if problems is not None:
                problems.append(f"skill {skill.path!r} ({skill.origin}) is shadowed by an earlier one")
            continue
        served[skill.path] = skill
    return list(served.values())
