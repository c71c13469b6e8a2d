"""The Skills extension (SEP-2640) end to end: an admin skill's versions and stored digests as
skills/get serves them. The other tests have a file named after their module: test_methods.py,
test_resources.py, test_sources.py, test_catalog.py (and tests/mcp_oauth/models/test_skills.py)."""

from __future__ import annotations

import pytest

from mcp_oauth.models import SkillFile
from tests.support.skills import Legacy, admin_skill, digest

pytestmark = pytest.mark.django_db(transaction=True)


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
