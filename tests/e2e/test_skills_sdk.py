"""End to end: the official MCP Python SDK client (mcp 2.3.0; it has no skills API, so the
extension's methods go through its generic ``session.send_request``) against the live server, in
both eras: the announcement, ``skills/list`` and ``skills/get`` of the reference site's folder skill
(``project/mcp_skills/release-notes``, an installed app's) and of a skill created in the admin, and
every listed file read back with ``resources/read`` to the bytes of its digest and size."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from django.contrib.auth import get_user_model
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from oauth2_provider.models import get_application_model
from pydantic import ConfigDict

from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.live import free_port, run_asgi_server
from tests.support.skills import EXTENSION, admin_skill

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PROJECT_SKILL = Path(__file__).resolve().parents[2] / "project" / "mcp_skills" / "release-notes"


class AnyResult(types.Result):
    """Whatever the extension's methods return (the SDK knows no skills result type)."""

    model_config = ConfigDict(extra="allow")


class SkillsRequest(types.Request):
    method: str
    params: dict[str, Any] | None = None


@pytest.fixture
def live(settings, mint_token):
    port = free_port()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": f"http://127.0.0.1:{port}"}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    resource = ensure_default_resource()
    user = get_user_model().objects.create_user("alice", "alice@example.com", "pw")
    Application = get_application_model()
    app = Application.objects.create(
        name="SDK",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1/callback",
    )
    admin_skill(
        "ops/runbook",
        files={
            "SKILL.md": b"---\nname: runbook\ndescription: Runbook for on-call\n---\n\n# Runbook\n",
            "scripts/page.sh": b"#!/bin/sh\necho page\n",
            "assets/logo.bin": b"\x89PNG\x00\xff",
        },
    )
    from project.asgi import application

    with run_asgi_server(application, port) as base:
        yield base + "/mcp", mint_token(user, app, resource=resource.uri)


@asynccontextmanager
async def sdk(url: str, token: str, mode: str):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            yield client


async def send(client: Client, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    result = await client.session.send_request(SkillsRequest(method=method, params=params or {}), AnyResult)
    return result.model_dump(by_alias=True, exclude_none=True)


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


async def lists_gets_and_reads(url: str, token: str, mode: str) -> None:
    async with sdk(url, token, mode) as client:
        assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
        extensions = client.server_capabilities.model_dump(by_alias=True).get("extensions") or {}
        assert extensions[EXTENSION] == {"directoryRead": True}
        assert client.server_capabilities.resources is not None

        listed = await send(client, "skills/list")
        skills = {entry["uri"]: entry for entry in listed["skills"]}
        release = skills["skill://release-notes/SKILL.md"]
        runbook = skills["skill://ops/runbook/SKILL.md"]
        assert release["frontmatter"]["name"] == "release-notes"
        assert runbook["frontmatter"] == {"name": "runbook", "description": "Runbook for on-call"}
        if mode == "auto":
            assert listed["cacheScope"] == "private" and "ttlMs" in listed

        on_disk = {
            f"skill://release-notes/{p.relative_to(PROJECT_SKILL).as_posix()}": p.read_bytes()
            for p in PROJECT_SKILL.rglob("*")
            if p.is_file()
        }
        assert {r["uri"]: (r["digest"], r["size"]) for r in release["resources"]} == {
            uri: (sha256(data), len(data)) for uri, data in on_disk.items()
        }
        assert [r["uri"] for r in runbook["resources"]] == [
            "skill://ops/runbook/SKILL.md",
            "skill://ops/runbook/assets/logo.bin",
            "skill://ops/runbook/scripts/page.sh",
        ]

        for uri, entry in (("skill://release-notes/SKILL.md", release), ("skill://ops/runbook/SKILL.md", runbook)):
            got = await send(client, "skills/get", {"uri": uri})
            assert got["skill"] == entry
            for item in entry["resources"]:
                content = (await client.read_resource(item["uri"])).contents[0]
                data = content.text.encode() if hasattr(content, "text") else base64.b64decode(content.blob)
                assert (sha256(data), len(data)) == (item["digest"], item["size"]), item["uri"]

        with pytest.raises(MCPError) as caught:
            await send(client, "skills/get", {"uri": "skill://ops/nothing/SKILL.md"})
        assert caught.value.error.code == -32602
        with pytest.raises(MCPError) as caught:
            await client.read_resource("skill://release-notes/../../settings.py")
        assert caught.value.error.code == -32602

        children = (await send(client, "resources/directory/read", {"uri": "skill://ops/runbook"}))["resources"]
        assert [(c["uri"], c["mimeType"]) for c in children] == [
            ("skill://ops/runbook/SKILL.md", "text/markdown"),
            ("skill://ops/runbook/assets", "inode/directory"),
            ("skill://ops/runbook/scripts", "inode/directory"),
        ]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_python_sdk_lists_gets_and_verifies_skills(live, mode):
    url, token = live
    asyncio.run(lists_gets_and_reads(url, token, mode))
