"""The Skills extension's methods (SEP-2640) through /mcp in both eras: the announcement,
``skills/list`` and ``skills/get`` with exact digests, the modern era's cache fields,
``resources/directory/read``, pagination and its cursor."""

from __future__ import annotations

import pytest

from tests.support.skills import EXTENSION, GUIDE_MD, PROJECT_SKILL, Legacy, Modern, admin_skill, by_uri, digest

pytestmark = pytest.mark.django_db(transaction=True)


def test_both_eras_announce_the_extension_with_resources(skills_root, token):
    legacy = Legacy(token).initialize["capabilities"]
    assert legacy["extensions"][EXTENSION] == {"directoryRead": True}
    assert "resources" in legacy
    modern = Modern(token).call("server/discover")["result"]["capabilities"]
    assert modern["extensions"][EXTENSION] == {"directoryRead": True}
    assert "resources" in modern


def test_skills_list_serves_app_folder_extra_folder_and_admin_skills_with_exact_digests(skills_root, token):
    admin_skill()
    result = Legacy(token).call("skills/list")["result"]
    skills = by_uri(result["skills"])
    assert list(skills) == sorted(skills)  # by path
    guide = skills["skill://team/guide/SKILL.md"]
    assert guide["frontmatter"] == {
        "name": "guide",
        "description": "How to use the test server",
        "license": "MIT",
        "released": "2026-01-01",  # YAML 1.2: a date stays the text the author wrote
        "enabled": "yes",
        "metadata": {"version": "1.0"},
    }
    assert guide["resources"] == [
        {"uri": "skill://team/guide/SKILL.md", "digest": digest(GUIDE_MD), "size": len(GUIDE_MD)},
        {"uri": "skill://team/guide/references/DETAILS.md", "digest": digest(b"# Details\n"), "size": 10},
    ]
    release = skills["skill://release-notes/SKILL.md"]  # project/mcp_skills/: an installed app's folder
    on_disk = (PROJECT_SKILL / "SKILL.md").read_bytes()
    assert release["resources"][0] == {"uri": release["uri"], "digest": digest(on_disk), "size": len(on_disk)}
    runbook = skills["skill://ops/runbook/SKILL.md"]
    assert [r["uri"] for r in runbook["resources"]] == [
        "skill://ops/runbook/SKILL.md",
        "skill://ops/runbook/examples/page.md",
    ]
    assert runbook["resources"][1]["digest"] == digest(b"# Page the on-call\n")
    assert "nextCursor" not in result


def test_modern_results_are_private_cacheable_and_complete(skills_root, token):
    client = Modern(token)
    listed = client.call("skills/list")
    assert listed["_status"] == 200
    assert listed["result"]["resultType"] == "complete"
    assert listed["result"]["cacheScope"] == "private"
    assert isinstance(listed["result"]["ttlMs"], int)
    got = client.call("skills/get", {"uri": "skill://team/guide/SKILL.md"})["result"]
    assert got["skill"] == by_uri(listed["result"]["skills"])["skill://team/guide/SKILL.md"]
    assert got["cacheScope"] == "private" and "nextCursor" not in got


def test_directory_read_lists_direct_children(skills_root, token):
    session = Legacy(token)
    root = session.call("resources/directory/read", {"uri": "skill://team/guide"})["result"]["resources"]
    assert [(r["uri"], r["mimeType"]) for r in root] == [
        ("skill://team/guide/SKILL.md", "text/markdown"),
        ("skill://team/guide/references", "inode/directory"),
    ]
    sub = session.call("resources/directory/read", {"uri": "skill://team/guide/references"})["result"]["resources"]
    assert sub == [
        {
            "uri": "skill://team/guide/references/DETAILS.md",
            "name": "DETAILS.md",
            "mimeType": "text/markdown",
            "size": 10,
        }
    ]
    prefix = session.call("resources/directory/read", {"uri": "skill://team"})["result"]["resources"]
    assert prefix == [{"uri": "skill://team/guide", "name": "guide", "mimeType": "inode/directory"}]
    for not_a_directory in ("skill://team/guide/SKILL.md", "skill://tea", "skill://team/guide/nothing", "notes://1"):
        error = session.call("resources/directory/read", {"uri": not_a_directory})["error"]
        assert error["code"] == -32602, not_a_directory


def test_pagination_never_splits_an_entry_and_refuses_a_foreign_cursor(settings, skills_root, token):
    admin_skill()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SKILLS_PAGE_SIZE": 1}
    session = Legacy(token)
    seen, cursor = [], None
    while True:
        result = session.call("skills/list", {"cursor": cursor} if cursor else {})["result"]
        assert len(result["skills"]) == 1
        seen.append(result["skills"][0]["uri"])
        cursor = result.get("nextCursor")
        if not cursor:
            break
    assert seen == sorted(set(seen)) and len(seen) == 3
    error = session.call("skills/list", {"cursor": "forged"})["error"]
    assert (error["code"], error["message"]) == (-32602, "Invalid params for skills/list: unknown cursor")
