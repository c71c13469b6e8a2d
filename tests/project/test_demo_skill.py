"""``manage.py ensure_demo_skill`` (run by ``make run``): the reference site's admin skill
``demo/note-taking``, created once, kept as an operator left it, and served next to the folder skill
``release-notes``."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from mcp_oauth.models import Skill
from tests.support.skills import Legacy, digest

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_demo_skill_is_created_once_and_served(resource, user, public_app, mint_token):
    call_command("ensure_demo_skill")
    skill = Skill.objects.get(path="demo/note-taking")
    assert (skill.version, skill.front_matter["name"]) == (1, "note-taking")
    skill.is_active = False  # an operator's choice survives the next `make run`
    skill.save()
    call_command("ensure_demo_skill")
    assert Skill.objects.get().is_active is False
    Skill.objects.update(is_active=True)

    session = Legacy(mint_token(user, public_app, scope="mcp", resource=resource.uri))
    skills = {entry["uri"]: entry for entry in session.call("skills/list")["result"]["skills"]}
    assert set(skills) >= {"skill://demo/note-taking/SKILL.md", "skill://release-notes/SKILL.md"}
    example = session.call("resources/read", {"uri": "skill://demo/note-taking/examples/good-note.md"})["result"]
    text = example["contents"][0]["text"].encode()
    assert skills["skill://demo/note-taking/SKILL.md"]["resources"][1] == {
        "uri": "skill://demo/note-taking/examples/good-note.md",
        "digest": digest(text),
        "size": len(text),
    }
