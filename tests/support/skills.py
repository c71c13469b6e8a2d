"""Helpers of the skills tests: a skills folder written on disk, an admin skill, the JSON-RPC calls
of both eras through the Django test client."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from django.test import Client

from mcp_oauth.mcp_server.skills.catalog import forget_folder_flag
from mcp_oauth.models import Skill, SkillFile

MODERN = "2026-07-28"
ACCEPT = "application/json, text/event-stream"
EXTENSION = "io.modelcontextprotocol/skills"

GUIDE_MD = b"""---
name: guide
description: How to use the test server
license: MIT
released: 2026-01-01
enabled: yes
metadata:
  version: "1.0"
---

# Guide

See `references/DETAILS.md`.
"""


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def write_folder_skill(root: Path, path: str = "team/guide", files: dict[str, bytes] | None = None) -> Path:
    """A folder skill under ``root`` (``SKILL_DIRS`` entry): its directory."""
    directory = root.joinpath(*path.split("/"))
    for name, data in (files or {"SKILL.md": GUIDE_MD, "references/DETAILS.md": b"# Details\n"}).items():
        target = directory.joinpath(*name.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    forget_folder_flag()
    return directory


def admin_skill(path: str = "ops/runbook", files: dict[str, bytes] | None = None, **fields: Any) -> Skill:
    """A database skill with ``files`` (default: a SKILL.md and one example), saved as the admin does."""
    name = path.rsplit("/", 1)[-1]
    files = files or {
        "SKILL.md": f"---\nname: {name}\ndescription: Runbook for on-call\n---\n\n# Runbook\n".encode(),
        "examples/page.md": b"# Page the on-call\n",
    }
    organizations = fields.pop("organizations", ())
    skill = Skill.objects.create(path=path, **fields)
    skill.organizations.set(organizations)
    for file_path, data in files.items():
        SkillFile(skill=skill, path=file_path, content=data).save(refresh=False)
    skill.refresh_manifest()
    return skill


class Legacy:
    """One 2025-11-25 session."""

    def __init__(self, token: str, path: str = "/mcp") -> None:
        self.client, self.token, self.path, self.next_id = Client(), token, path, 1
        self.session_id = None
        response = self.post(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        )
        self.session_id = response["Mcp-Session-Id"]
        self.initialize = json.loads(response.content)["result"]

    def post(self, method: str, params: dict | None = None):
        self.next_id += 1
        headers = {"Accept": ACCEPT, "Authorization": f"Bearer {self.token}"}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        return self.client.post(self.path, json.dumps(message), content_type="application/json", headers=headers)

    def call(self, method: str, params: dict | None = None) -> dict:
        response = self.post(method, params)
        assert response.status_code == 200, (response.status_code, response.content)
        return json.loads(response.content)


class Modern:
    """Stateless 2026-07-28 requests."""

    def __init__(self, token: str, path: str = "/mcp") -> None:
        self.client, self.token, self.path = Client(), token, path

    def post(self, method: str, params: dict | None = None):
        params = dict(params or {})
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "skills-tests", "version": "1"},
        }
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Accept": ACCEPT,
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
        }
        if method == "resources/read":
            headers["Mcp-Name"] = params["uri"]
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return self.client.post(self.path, json.dumps(message), content_type="application/json", headers=headers)

    def call(self, method: str, params: dict | None = None) -> dict:
        response = self.post(method, params)
        body = json.loads(response.content)
        body["_status"] = response.status_code
        return body


#: The reference site's own skill folder (``project/mcp_skills/release-notes``, an installed app's).
PROJECT_SKILL = Path(__file__).resolve().parents[2] / "project" / "mcp_skills" / "release-notes"


def by_uri(skills: list[dict]) -> dict[str, dict]:
    """A ``skills/list`` result's entries by their ``uri``."""
    return {entry["uri"]: entry for entry in skills}
