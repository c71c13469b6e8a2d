"""``Skill`` and ``SkillFile``: size and digest computed on save, the front matter read from
``SKILL.md``, ``version`` raised only when the files change, ``skill_changed`` sent, the path
checked by ``clean()``, one file per path."""

from __future__ import annotations

import hashlib

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from mcp_oauth.models import Skill, SkillFile
from mcp_oauth.signals import skill_changed

pytestmark = pytest.mark.django_db

SKILL_MD = b"---\nname: refunds\ndescription: Handle a refund.\n---\n# Refunds\n"


@pytest.fixture
def changes():
    sent = []

    def receiver(sender, skill, **kwargs):
        sent.append((sender, skill.path, skill.version))

    skill_changed.connect(receiver)
    yield sent
    skill_changed.disconnect(receiver)


def test_a_file_gets_its_size_and_sha256_digest_and_the_skill_its_front_matter(changes):
    skill = Skill.objects.create(path="acme/billing/refunds")
    assert (skill.name, str(skill), skill.version, skill.front_matter) == ("refunds", "acme/billing/refunds", 0, {})
    made = SkillFile.objects.create(skill=skill, path="SKILL.md", content=SKILL_MD)
    assert str(made) == "SKILL.md"
    assert made.size == len(SKILL_MD) == 62
    assert made.digest == "sha256:" + hashlib.sha256(SKILL_MD).hexdigest()
    skill.refresh_from_db()
    assert skill.version == 1
    assert skill.front_matter == {"name": "refunds", "description": "Handle a refund."}
    assert changes == [(Skill, "acme/billing/refunds", 1)]


def test_the_version_rises_only_when_the_files_change(changes):
    skill = Skill.objects.create(path="refunds")
    md = SkillFile.objects.create(skill=skill, path="SKILL.md", content=SKILL_MD)
    md.save()  # the same bytes again: no new version
    skill.refresh_from_db()
    assert skill.version == 1
    md.content = SKILL_MD + b"More.\n"
    md.save()
    skill.refresh_from_db()
    assert skill.version == 2
    extra = SkillFile.objects.create(skill=skill, path="references/FORMS.md", content=b"forms")
    skill.refresh_from_db()
    assert skill.version == 3
    extra.delete()
    skill.refresh_from_db()
    assert skill.version == 4
    assert [version for _, _, version in changes] == [1, 1, 2, 3, 4]


def test_several_files_saved_as_one_change_make_one_version():
    skill = Skill.objects.create(path="refunds")
    SkillFile(skill=skill, path="SKILL.md", content=SKILL_MD).save(refresh=False)
    SkillFile(skill=skill, path="scripts/run.py", content=b"print(1)\n").save(refresh=False)
    skill.refresh_from_db()
    assert skill.version == 0
    skill.refresh_manifest()
    assert skill.version == 1 and skill.front_matter["name"] == "refunds"


def test_an_unreadable_skill_md_leaves_empty_front_matter():
    skill = Skill.objects.create(path="refunds")
    SkillFile.objects.create(skill=skill, path="SKILL.md", content=b"no front matter here")
    skill.refresh_from_db()
    assert skill.front_matter == {} and skill.version == 1


def test_scope_list_splits_the_required_scopes():
    assert Skill(path="x", required_scopes="mcp  billing:read").scope_list == ["mcp", "billing:read"]
    assert Skill(path="x").scope_list == []


@pytest.mark.parametrize("path", ["../escape.md", "/absolute.md", "a\\b.md", ""])
def test_clean_refuses_a_path_outside_the_skill(path):
    with pytest.raises(ValidationError) as refused:
        SkillFile(skill=Skill(path="refunds"), path=path, content=b"x").clean()
    assert list(refused.value.message_dict) == ["path"]


def test_one_file_per_path_and_unique_skill_paths():
    skill = Skill.objects.create(path="refunds")
    SkillFile.objects.create(skill=skill, path="SKILL.md", content=SKILL_MD)
    with pytest.raises(IntegrityError), transaction.atomic():
        SkillFile.objects.create(skill=skill, path="SKILL.md", content=b"again")
    with pytest.raises(IntegrityError), transaction.atomic():
        Skill.objects.create(path="refunds")
    assert bytes(SkillFile.objects.get().content) == SKILL_MD
