"""The Skills extension's methods (SEP-2640) on the method table, in both eras.

====================================  ========================================================
method                                result
====================================  ========================================================
``skills/list``                       ``{skills: [Skill], nextCursor?}``: the skills the caller
                                      may see, by path, ``SKILLS_PAGE_SIZE`` a page (an entry
                                      is never split), the cursor opaque and signed
``skills/get``                        ``{skill: Skill}``; ``-32602`` when ``uri`` is not the
                                      ``SKILL.md`` of a skill the caller may see
``resources/directory/read``          ``{resources: [Resource], nextCursor?}``: the direct
                                      children of a skill directory (files, and subdirectories
                                      as ``inode/directory``), or of a prefix directory above
                                      visible skills (``skill://acme``); ``-32602`` otherwise
====================================  ========================================================

A ``Skill`` entry is ``{uri, frontmatter, resources: [{uri, digest, size}]}``: the verbatim front
matter of its ``SKILL.md`` and every file of the skill, ``SKILL.md`` first. Results are private
(they depend on the caller): on 2026-07-28 the table adds ``ttlMs`` and ``cacheScope: "private"``
and ``resultType``. The extension is announced in ``capabilities.extensions`` (``initialize`` and
``server/discover``) as ``{"directoryRead": true}`` while any skill is installed, with the
``resources`` capability the SEP requires beside it.
"""

from __future__ import annotations

from typing import Any

from django.core import signing

from mcp_oauth.mcp_server.registry.base import call as run
from mcp_oauth.mcp_server.registry.context import RequestContext
from mcp_oauth.mcp_server.registry.resources import active_resource_registry, registry
from mcp_oauth.mcp_server.skills.catalog import (
    find_directory,
    find_skill,
    prefix_children,
    skills_offered,
    visible_skills,
)
from mcp_oauth.mcp_server.skills.resources import SkillResources, skill_md_resource
from mcp_oauth.mcp_server.skills.sources import ServedSkill
from mcp_oauth.mcp_server.transport.extensions import register_extension
from mcp_oauth.mcp_server.transport.jsonrpc import INVALID_PARAMS, McpError
from mcp_oauth.mcp_server.transport.table import PRIVATE, Call, MethodTable
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.skill_format import DIRECTORY_MIME_TYPE, EXTENSION, skill_uri

__all__ = ["entry", "extension_settings", "install", "skill_resources"]

_CURSOR_SALT = "mcp_oauth.skills.cursor"
#: The one :class:`SkillResources` of the default resource registry.
skill_resources = SkillResources()


def entry(skill: ServedSkill) -> dict[str, Any]:
    """The ``Skill`` entry of ``skill`` (SEP-2640 "Skill Entries")."""
    return {
        "uri": skill.uri,
        "frontmatter": skill.front_matter,
        "resources": [
            {"uri": skill_uri(skill.path, info.path), "digest": info.digest, "size": info.size} for info in skill.files
        ],
    }


def _context(call: Call) -> RequestContext:
    return RequestContext.for_call(call)


def _string_param(call: Call, name: str, required: bool = True) -> str | None:
    value = call.params.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise McpError(INVALID_PARAMS, f"Invalid params for {call.method}: {name} must be a non-empty string")
    return value


def _offset(call: Call, key: str) -> int:
    cursor = _string_param(call, "cursor", required=False)
    if cursor is None:
        return 0
    try:
        data = signing.loads(cursor, salt=_CURSOR_SALT)
    except signing.BadSignature:
        data = None
    if not isinstance(data, dict) or data.get("k") != key or not isinstance(data.get("o"), int) or data["o"] < 0:
        raise McpError(INVALID_PARAMS, f"Invalid params for {call.method}: unknown cursor")
    return data["o"]


def _page(call: Call, key: str, items: list[Any], field: str) -> dict[str, Any]:
    offset = _offset(call, key)
    size = max(1, int(mcp_oauth_settings.SKILLS_PAGE_SIZE))
    result: dict[str, Any] = {field: items[offset : offset + size]}
    if offset + size < len(items):
        result["nextCursor"] = signing.dumps({"k": key, "o": offset + size}, salt=_CURSOR_SALT, compress=True)
    return result


async def list_skills(call: Call) -> dict[str, Any]:
    """``skills/list``. :raises McpError: -32602 for a cursor this server did not issue."""
    ctx = _context(call)
    entries = [entry(skill) for skill in await run(visible_skills, ctx)]
    return _page(call, "skills/list", entries, "skills")


def _unknown_skill(uri: str) -> McpError:
    return McpError(INVALID_PARAMS, f"No skill is served at {uri[:200]}", {"uri": uri[:200]})


async def get_skill(call: Call) -> dict[str, Any]:
    """``skills/get``. :raises McpError: -32602 when ``uri`` is not a visible skill's ``SKILL.md``."""
    uri = _string_param(call, "uri")
    assert uri is not None
    skill = await run(find_skill, _context(call), uri)
    if skill is None:
        raise _unknown_skill(uri)
    return {"skill": entry(skill)}


def _children(skill: ServedSkill, directory: str) -> list[dict[str, Any]]:
    prefix = f"{directory}/" if directory else ""
    children: dict[str, dict[str, Any]] = {}
    for info in skill.files:
        if not info.path.startswith(prefix):
            continue
        rest = info.path[len(prefix) :]
        head, _, tail = rest.partition("/")
        uri = skill_uri(skill.path, prefix + head)
        if tail:
            children.setdefault(uri, {"uri": uri, "name": head, "mimeType": DIRECTORY_MIME_TYPE})
        elif info.path == "SKILL.md":
            children[uri] = skill_md_resource(skill).model_dump(by_alias=True, exclude_none=True)
        else:
            children[uri] = {"uri": uri, "name": head, "mimeType": info.mime_type, "size": info.size}
    return [children[uri] for uri in sorted(children)]


async def read_directory(call: Call) -> dict[str, Any]:
    """``resources/directory/read``. :raises McpError: -32602 when ``uri`` is not a directory of a
    visible skill (a file, an unknown or hidden skill)."""
    uri = _string_param(call, "uri")
    assert uri is not None
    ctx, target = _context(call), uri.rstrip("/") if uri != "skill://" else uri
    found = await run(find_directory, ctx, target)
    if found is not None:
        skill, directory = found
        return _page(call, f"resources/directory/read {uri}", _children(skill, directory), "resources")
    below = await run(prefix_children, ctx, target)
    if below is None:
        raise McpError(INVALID_PARAMS, f"{uri[:200]} is not a directory resource", {"uri": uri[:200]})
    children = [{"uri": f"{target}/{name}", "name": name, "mimeType": DIRECTORY_MIME_TYPE} for name in below]
    return _page(call, f"resources/directory/read {uri}", children, "resources")


def extension_settings() -> dict[str, Any] | None:
    """The extension's settings while some skill is installed and the active resource registry
    serves skill files; None (not announced) otherwise."""
    if skill_resources not in list(active_resource_registry()) or not skills_offered():
        return None
    return {"directoryRead": True}


def install(table: MethodTable) -> None:
    """Register ``skills/list``, ``skills/get`` and ``resources/directory/read`` (both eras), the
    ``skill://`` template on the default resource registry and the extension."""
    if skill_resources not in list(registry):
        registry.add(skill_resources)
    table.register("skills/list", list_skills, cache=PRIVATE, replace=True)
    table.register("skills/get", get_skill, cache=PRIVATE, replace=True)
    table.register("resources/directory/read", read_directory, replace=True)
    register_extension(EXTENSION, extension_settings)
