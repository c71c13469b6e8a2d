"""The skills screen (mcp_oauth.admin.skills): a skill created with its files (typed or uploaded),
its digests and version, an edit that raises the version once, and the checks that refuse a
broken skill without saving anything. In Chromium: tests/browser/test_skills_admin.py."""

from __future__ import annotations

import hashlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from mcp_oauth.models import Skill, SkillFile
from tests.mcp_oauth.admin.test_admin import admin, url  # noqa: F401 - fixtures and helpers

pytestmark = pytest.mark.django_db

SKILL_MD = "---\r\nname: runbook\r\ndescription: Runbook for on-call\r\n---\r\n\r\n# Runbook\r\n"


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def form(path: str, files: list[dict], initial: int = 0, **extra) -> dict:
    data = {
        "path": path,
        "is_active": "on",
        "required_scopes": "",
        "files-TOTAL_FORMS": str(len(files)),
        "files-INITIAL_FORMS": str(initial),
        "files-MIN_NUM_FORMS": "0",
        "files-MAX_NUM_FORMS": "1000",
        **extra,
    }
    for index, file in enumerate(files):
        for key, value in file.items():
            data[f"files-{index}-{key}"] = value
    return data


def test_adding_a_skill_with_typed_and_uploaded_files(admin):
    logo = SimpleUploadedFile("logo.png", b"\x89PNG\r\n\x00\xff", content_type="image/png")
    response = admin.post(
        url(Skill, "add"),
        form(
            "ops/runbook",
            [
                {"path": "SKILL.md", "text": SKILL_MD},
                {"path": "examples/page.md", "text": "# Page\r\n"},
                {"path": "assets/logo.png", "upload": logo},
            ],
        ),
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    skill = Skill.objects.get(path="ops/runbook")
    assert skill.version == 1
    assert skill.front_matter == {"name": "runbook", "description": "Runbook for on-call"}
    stored = {f.path: (bytes(f.content), f.size, f.digest) for f in skill.files.all()}
    skill_md = SKILL_MD.replace("\r\n", "\n").encode()  # typed text is stored with \n line ends
    assert stored == {
        "SKILL.md": (skill_md, len(skill_md), digest(skill_md)),
        "examples/page.md": (b"# Page\n", 7, digest(b"# Page\n")),
        "assets/logo.png": (b"\x89PNG\r\n\x00\xff", 8, digest(b"\x89PNG\r\n\x00\xff")),
    }
    page = admin.get(url(Skill)).content.decode()
    assert "ops/runbook" in page and '<td class="field-file_count">3</td>' in page


def test_an_edit_raises_the_version_once_and_keeps_binary_files(admin):
    admin.post(
        url(Skill, "add"),
        form(
            "ops/runbook",
            [
                {"path": "SKILL.md", "text": SKILL_MD},
                {"path": "a.bin", "upload": SimpleUploadedFile("a.bin", b"\x00\xfe")},
            ],
        ),
    )
    skill = Skill.objects.get(path="ops/runbook")
    files = {f.path: f for f in skill.files.all()}
    response = admin.post(
        url(Skill, "change", skill.pk),
        form(
            "ops/runbook",
            [
                {"id": files["SKILL.md"].pk, "skill": skill.pk, "path": "SKILL.md", "text": SKILL_MD + "More.\r\n"},
                {"id": files["a.bin"].pk, "skill": skill.pk, "path": "a.bin", "text": ""},
                {"path": "new.md", "text": "new"},
            ],
            initial=2,
        ),
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    skill.refresh_from_db()
    assert skill.version == 2
    assert bytes(SkillFile.objects.get(skill=skill, path="a.bin").content) == b"\x00\xfe"
    assert sorted(skill.files.values_list("path", flat=True)) == ["SKILL.md", "a.bin", "new.md"]


@pytest.mark.parametrize(
    ("path", "files", "error"),
    [
        ("ops/runbook", [{"path": "README.md", "text": "x"}], "A skill needs a SKILL.md file."),
        ("ops/other", [{"path": "SKILL.md", "text": SKILL_MD}], "the skill path must end with it"),
        ("ops/runbook", [{"path": "SKILL.md", "text": "# no front matter"}], "does not begin with a --- delimited"),
        (
            "ops/runbook",
            [{"path": "SKILL.md", "text": SKILL_MD}, {"path": "../escape.md", "text": "x"}],
            "is not a relative path",
        ),
        ("../runbook", [{"path": "SKILL.md", "text": SKILL_MD}], "segments of letters"),
        (
            "ops/runbook",
            [{"path": "SKILL.md", "text": SKILL_MD}, {"path": "SKILL.md", "text": SKILL_MD}],
            "Please correct the duplicate data for path",
        ),
    ],
)
def test_a_broken_skill_is_refused_and_nothing_is_saved(admin, path, files, error):
    response = admin.post(url(Skill, "add"), form(path, files))
    assert response.status_code == 200
    assert error in response.content.decode().replace("&#x27;", "'").replace("&quot;", '"')
    assert not Skill.objects.exists() and not SkillFile.objects.exists()
