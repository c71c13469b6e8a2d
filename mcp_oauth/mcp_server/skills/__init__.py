"""The Skills extension (``io.modelcontextprotocol/skills``, SEP-2640): skills served over MCP.

* :mod:`.sources`: folder skills (``<app>/mcp_skills/``, ``SKILL_DIRS``) and admin skills
  (:class:`mcp_oauth.models.Skill`), with their cached digests;
* :mod:`.catalog`: what one request may see (scopes, organizations, the adapter's
  ``skill_visible``) and the lookups by URI;
* :mod:`.resources`: the ``skill://{+path}`` resource template (``resources/read``, ``resources/list``);
* :mod:`.methods`: ``skills/list``, ``skills/get``, ``resources/directory/read`` and the
  extension's announcement, installed by :mod:`mcp_oauth.mcp_server.features`.

The format itself (front matter, names, URIs, digests) is :mod:`mcp_oauth.shared.skill_format`.
"""

from mcp_oauth.mcp_server.skills.sources import ServedSkill, SkillFileInfo

__all__ = ["ServedSkill", "SkillFileInfo"]
