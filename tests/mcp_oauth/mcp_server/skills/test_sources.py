"""Where skills come from: folder skills read again when a file changes (new digest, new file), invalid
folder skills not served, and the system check naming each folder skill that is not served."""

from __future__ import annotations

import os

import pytest

from tests.support.skills import Legacy, by_uri, digest, write_folder_skill

pytestmark = pytest.mark.django_db(transaction=True)


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


def test_invalid_skills_are_not_served(settings, skills_root, token):
    write_folder_skill(skills_root, "wrong-name", {"SKILL.md": b"---\nname: other\ndescription: d\n---\n"})
    write_folder_skill(skills_root, "no-front-matter", {"SKILL.md": b"# Just text\n"})
    write_folder_skill(skills_root, "Upper", {"SKILL.md": b"---\nname: Upper\ndescription: d\n---\n"})
    uris = set(by_uri(Legacy(token).call("skills/list")["result"]["skills"]))
    assert "skill://team/guide/SKILL.md" in uris
    assert not {u for u in uris if "wrong-name" in u or "no-front-matter" in u or "Upper" in u}


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
