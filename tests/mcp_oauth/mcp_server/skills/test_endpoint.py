"""The Skills extension (SEP-2640) through /mcp in both eras: the announcement, skills/list,
skills/get, resources/read and resources/list of skill files, resources/directory/read, digests
that follow the files, visibility by scope, organization and adapter, admin skill versions."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from mcp_oauth.adapter import DefaultMCPAdapter
from mcp_oauth.mcp_server.skills.catalog import DATABASE_FLAG_KEY
from mcp_oauth.models import SkillFile
from tests.support.organization_fixtures import acme, globex  # noqa: F401
from tests.support.organizations import bind
from tests.support.skills import EXTENSION, GUIDE_MD, Legacy, Modern, admin_skill, digest, write_folder_skill

pytestmark = pytest.mark.django_db(transaction=True)

PROJECT_SKILL = Path(__file__).resolve().parents[4] / "project" / "mcp_skills" / "release-notes"


@pytest.fixture
def skills_root(settings, tmp_path):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SKILL_DIRS": [str(tmp_path)]}
    write_folder_skill(tmp_path)
    return tmp_path


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, scope="mcp", resource=resource.uri)


def by_uri(skills: list[dict]) -> dict[str, dict]:
    return {entry["uri"]: entry for entry in skills}


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


def test_an_edited_file_gets_its_new_digest_on_the_next_listing(skills_root, token):
    session = Legacy(token)
    details = skills_root / "team" / "guide" / "references" / "DETAILS.md"
    details.write_bytes(b"# Details, edited\n")
    os.utime(details, ns=(1, 1_000_000_000_123))  # a new mtime even within one clock tick
    entry = session.call("skills/get", {"uri": "skill://team/guide/SKILL.md"})["result"]["skill"]
    assert entry["resources"][1] == {
        "uri": "skill://team/guide/references/DETAILS.md",
        "digest": digest(b"# Details, edited\n"),
        "size": 18,
    }
    (skills_root / "team" / "guide" / "references" / "NEW.md").write_bytes(b"new")
    entry = session.call("skills/get", {"uri": "skill://team/guide/SKILL.md"})["result"]["skill"]
    assert [r["uri"].rsplit("/", 1)[1] for r in entry["resources"]] == ["SKILL.md", "DETAILS.md", "NEW.md"]


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


def test_invalid_skills_are_not_served(settings, skills_root, token):
    write_folder_skill(skills_root, "wrong-name", {"SKILL.md": b"---\nname: other\ndescription: d\n---\n"})
    write_folder_skill(skills_root, "no-front-matter", {"SKILL.md": b"# Just text\n"})
    write_folder_skill(skills_root, "Upper", {"SKILL.md": b"---\nname: Upper\ndescription: d\n---\n"})
    uris = set(by_uri(Legacy(token).call("skills/list")["result"]["skills"]))
    assert "skill://team/guide/SKILL.md" in uris
    assert not {u for u in uris if "wrong-name" in u or "no-front-matter" in u or "Upper" in u}


def test_a_skill_hidden_by_scope_is_unknown(skills_root, resource, user, public_app, mint_token):
    admin_skill(required_scopes="admin:skills")
    plain = Legacy(mint_token(user, public_app, scope="mcp", resource=resource.uri))
    allowed = Legacy(mint_token(user, public_app, scope="mcp admin:skills", resource=resource.uri))
    uri = "skill://ops/runbook/SKILL.md"
    assert uri in by_uri(allowed.call("skills/list")["result"]["skills"])
    assert uri not in by_uri(plain.call("skills/list")["result"]["skills"])
    hidden = plain.call("skills/get", {"uri": uri})["error"]
    unknown = plain.call("skills/get", {"uri": "skill://ops/nothing/SKILL.md"})["error"]
    assert hidden["code"] == unknown["code"] == -32602
    assert hidden["message"] == f"No skill is served at {uri}"
    assert plain.call("resources/read", {"uri": "skill://ops/runbook/examples/page.md"})["error"]["message"] == (
        "Resource not found: skill://ops/runbook/examples/page.md"
    )


def test_a_skill_limited_to_an_organization(skills_root, acme, globex, user, resource, public_app, mint_token):
    admin_skill(organizations=[acme])
    acme_token = mint_token(user, public_app, scope="mcp", resource=resource.uri)
    bind(acme_token, acme)
    globex_token = mint_token(user, public_app, scope="mcp", resource=resource.uri)
    bind(globex_token, globex)
    uri = "skill://ops/runbook/SKILL.md"
    assert uri in by_uri(Modern(acme_token).call("skills/list")["result"]["skills"])
    for other in (globex_token, mint_token(user, public_app, scope="mcp", resource=resource.uri)):
        assert uri not in by_uri(Modern(other).call("skills/list")["result"]["skills"])
        error = Modern(other).call("skills/get", {"uri": uri})
        assert (error["_status"], error["error"]["code"]) == (400, -32602)


class NoGuideForBob(DefaultMCPAdapter):
    def skill_visible(self, ctx, skill) -> bool:
        return not (skill.name == "guide" and ctx.user.username == "bob")


def test_the_adapter_decides_per_user(settings, skills_root, user, other_user, resource, public_app, mint_token):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": NoGuideForBob}
    other_user.username = "bob"
    other_user.save()
    uri = "skill://team/guide/SKILL.md"
    alice = Legacy(mint_token(user, public_app, scope="mcp", resource=resource.uri))
    bob = Legacy(mint_token(other_user, public_app, scope="mcp", resource=resource.uri))
    assert uri in by_uri(alice.call("skills/list")["result"]["skills"])
    assert uri not in by_uri(bob.call("skills/list")["result"]["skills"])
    assert bob.call("skills/get", {"uri": uri})["error"]["code"] == -32602


def test_admin_skill_versions_and_stored_digests(skills_root, token):
    skill = admin_skill()
    assert skill.version == 1
    page = skill.files.get(path="examples/page.md")
    assert (page.size, page.digest) == (19, digest(b"# Page the on-call\n"))
    page.content = b"# Page the on-call now\n"
    page.save()
    skill.refresh_from_db()
    assert skill.version == 2
    skill.refresh_manifest()  # nothing changed: same version
    skill.refresh_from_db()
    assert skill.version == 2
    SkillFile.objects.get(skill=skill, path="examples/page.md").delete()
    skill.refresh_from_db()
    assert skill.version == 3
    entry = Legacy(token).call("skills/get", {"uri": "skill://ops/runbook/SKILL.md"})["result"]["skill"]
    assert [r["uri"] for r in entry["resources"]] == ["skill://ops/runbook/SKILL.md"]


def test_the_announcement_follows_the_database_without_folders(settings, token):
    from django.core.cache import cache

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SKILLS_DIR_NAME": None, "SKILL_DIRS": []}
    from mcp_oauth.mcp_server.skills.catalog import forget_folder_flag

    forget_folder_flag()
    cache.delete(DATABASE_FLAG_KEY)
    assert EXTENSION not in (Legacy(token).initialize["capabilities"].get("extensions") or {})
    skill = admin_skill()
    assert Modern(token).call("server/discover")["result"]["capabilities"]["extensions"][EXTENSION] == {
        "directoryRead": True
    }
    skill.delete()
    assert EXTENSION not in (Legacy(token).initialize["capabilities"].get("extensions") or {})


def test_the_system_check_names_each_folder_skill_not_served(settings, skills_root):
    from django.core.checks import run_checks

    write_folder_skill(skills_root, "wrong-name", {"SKILL.md": b"---\nname: other\ndescription: d\n---\n"})
    write_folder_skill(skills_root, "release-notes", {"SKILL.md": b"---\nname: release-notes\ndescription: d\n---\n"})
    messages = [m for m in run_checks() if m.id == "mcp_oauth.W151"]
    texts = [m.msg for m in messages]
    assert len(texts) == 2
    wrong = "wrong-name: front matter name 'other' is not the last segment of the skill path 'wrong-name'"
    assert sum(wrong in text for text in texts) == 1
    # SKILL_DIRS come first: the app's own release-notes is the one shadowed
    assert (
        sum(
            text.endswith("project/mcp_skills/release-notes: shadowed by an earlier skill at the path 'release-notes'")
            for text in texts
        )
        == 1
    )
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SKILL_DIRS": "not a list"}
    assert [m.id for m in run_checks() if m.id.endswith("151")] == ["mcp_oauth.E151"]


def test_an_admin_skill_change_is_one_list_changed_per_transaction(skills_root, token):
    from django.db import transaction

    from mcp_oauth.models import McpSessionEvent

    session = Legacy(token)

    def notices() -> int:
        methods = McpSessionEvent.objects.filter(session_id=session.session_id).values_list("message", flat=True)
        return sum(1 for message in methods if message.get("method") == "notifications/resources/list_changed")

    with transaction.atomic():
        skill = admin_skill()  # a skill, two files, its manifest: one change
    assert notices() == 1
    page = skill.files.get(path="examples/page.md")
    page.content = b"edited"
    page.save()
    assert notices() == 2
    try:
        with transaction.atomic():
            page.content = b"rolled back"
            page.save()
            raise RuntimeError
    except RuntimeError:
        pass
    assert notices() == 2
    skill.delete()
    assert notices() == 3
