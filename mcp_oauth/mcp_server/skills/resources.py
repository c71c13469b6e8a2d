"""Skill files as MCP resources: :class:`SkillResources`, the resource template ``skill://{+path}``
of the resource registry (SEP-2640 "Resource Mapping", "Reading Skill Content").

* ``resources/read`` of ``skill://<skill-path>/<file-path>`` returns the file listed in the skill's
  manifest: UTF-8 text as ``text``, anything else as a base64 ``blob``, the bytes the manifest's
  ``digest`` and ``size`` describe. A URI that names no listed file of a skill the caller may see
  (an unknown skill, a hidden one, ``..`` segments, a directory) answers ``-32602`` "Resource not
  found", the same answer in every case.
* ``resources/list`` lists each visible skill's ``SKILL.md`` (``name`` and ``description`` from its
  front matter, ``mimeType: text/markdown``, ``size``); supporting files are read, not listed.
"""

from __future__ import annotations

import base64
from typing import Any

import mcp_types as types

from mcp_oauth.mcp_server.registry.base import call
from mcp_oauth.mcp_server.registry.contents import Contents, ResourceNotFound
from mcp_oauth.mcp_server.registry.context import RequestContext
from mcp_oauth.mcp_server.registry.errors import resource_too_large
from mcp_oauth.mcp_server.registry.items import ResourceTemplate
from mcp_oauth.mcp_server.registry.uritemplate import UriTemplate
from mcp_oauth.mcp_server.skills.catalog import find_file, skills_offered, visible_skills
from mcp_oauth.mcp_server.skills.sources import ServedSkill
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.skill_format import split_uri

__all__ = ["SkillResources", "file_contents", "skill_md_resource"]

TEMPLATE = "skill://{+path}"


def skill_md_resource(skill: ServedSkill) -> types.Resource:
    """The ``resources/list`` entry of ``skill``'s ``SKILL.md``."""
    info = skill.files[0]
    return types.Resource(
        uri=skill.uri,
        name=skill.name,
        description=skill.description,
        mime_type="text/markdown",
        size=info.size,
    )


def file_contents(uri: str, mime: str, data: bytes) -> Contents:
    """``data`` as text when it is UTF-8 and the type is textual, else as a base64 blob."""
    textual = mime.startswith("text/") or mime in ("application/json", "application/x-yaml", "application/xml")
    if textual or mime.endswith("+json"):
        try:
            return types.TextResourceContents(uri=uri, mime_type=mime, text=data.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    return types.BlobResourceContents(uri=uri, mime_type=mime, blob=base64.b64encode(data).decode("ascii"))


class SkillResources(ResourceTemplate):
    """The ``skill://{+path}`` template serving every skill file (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__(
            name="skill-file",
            title="Skill files",
            description="A file of a skill (Skills extension): skill://<skill-path>/<file-path>",
            uri_template=UriTemplate(TEMPLATE),
            fn=None,
            lister=self._list,
        )

    def __repr__(self) -> str:
        return "<SkillResources skill://{+path}>"

    def offered(self) -> bool:
        """Announced (capability, templates list) only while some skill is installed."""
        return skills_offered()

    def match(self, uri: str) -> dict[str, str] | None:
        segments = split_uri(uri)
        return None if segments is None else {"path": "/".join(segments)}

    def convert(self, uri: str, raw: dict[str, str]) -> dict[str, Any]:
        return dict(raw)

    def limit(self) -> int:
        return int(mcp_oauth_settings.SKILL_MAX_BYTES)

    def _read_sync(self, ctx: RequestContext, uri: str) -> Contents:
        found = find_file(ctx, uri)
        if found is None:
            raise ResourceNotFound(uri)
        skill, info = found
        data = skill.read(info.path)
        if data is None:
            raise ResourceNotFound(uri)
        if len(data) > self.limit():
            raise resource_too_large(uri, None, self.limit())
        return file_contents(uri, info.mime_type, data)

    async def read(self, ctx: RequestContext, uri: str, params: dict[str, Any]) -> list[Contents]:
        return [await call(self._read_sync, ctx, uri)]

    async def exists(self, ctx: RequestContext, uri: str, params: dict[str, Any]) -> bool:
        return await call(lambda: find_file(ctx, uri) is not None)

    def _list(self, ctx: RequestContext) -> list[types.Resource]:
        return [skill_md_resource(skill) for skill in visible_skills(ctx)]
