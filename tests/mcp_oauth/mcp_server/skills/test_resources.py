"""Skill files as MCP resources: ``resources/read`` gives the bytes of each listed digest with its MIME
type, ``resources/list`` names each ``SKILL.md`` from its front matter (supporting files are read,
not listed)."""

from __future__ import annotations

import base64

import pytest

from tests.support.skills import GUIDE_MD, Legacy, admin_skill, digest

pytestmark = pytest.mark.django_db(transaction=True)


def test_reading_every_listed_file_gives_the_bytes_of_its_digest(skills_root, token):
    admin_skill(files={"SKILL.md": b"---\nname: runbook\ndescription: d\n---\n", "bin/tool": b"\x00\xffbinary"})
    session = Legacy(token)
    for skill in session.call("skills/list")["result"]["skills"]:
        for entry in skill["resources"]:
            contents = session.call("resources/read", {"uri": entry["uri"]})["result"]["contents"]
            assert len(contents) == 1 and contents[0]["uri"] == entry["uri"]
            data = contents[0]["text"].encode() if "text" in contents[0] else base64.b64decode(contents[0]["blob"])
            assert (digest(data), len(data)) == (entry["digest"], entry["size"])
    skill_md = session.call("resources/read", {"uri": "skill://team/guide/SKILL.md"})["result"]["contents"][0]
    assert skill_md["mimeType"] == "text/markdown"
    assert session.call("resources/read", {"uri": "skill://ops/runbook/bin/tool"})["result"]["contents"][0][
        "mimeType"
    ] == ("application/octet-stream")


def test_resources_list_names_each_skill_md_from_its_front_matter(skills_root, token):
    session = Legacy(token)
    listed, cursor = [], None
    while True:
        result = session.call("resources/list", {"cursor": cursor} if cursor else {})["result"]
        listed += result["resources"]
        cursor = result.get("nextCursor")
        if not cursor:
            break
    guide = next(r for r in listed if r["uri"] == "skill://team/guide/SKILL.md")
    assert guide == {
        "uri": "skill://team/guide/SKILL.md",
        "name": "guide",
        "description": "How to use the test server",
        "mimeType": "text/markdown",
        "size": len(GUIDE_MD),
    }
    assert not [r for r in listed if r["uri"].endswith("DETAILS.md")]  # supporting files are read, not listed
