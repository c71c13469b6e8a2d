"""Create the demo admin skill ``demo/note-taking`` if it is missing: ``manage.py ensure_demo_skill``.

A skill served from the database (the Skills extension), editable at /admin/mcp_oauth/skill/; the
reference site's other skill, ``release-notes``, is a folder (``project/mcp_skills/``). Run by
``make run``; an existing skill is left as it is (an operator's edits are kept).
"""

from django.core.management.base import BaseCommand
from django.db import transaction

from mcp_oauth.models import Skill, SkillFile

PATH = "demo/note-taking"

SKILL_MD = """---
name: note-taking
description: Keep the user's notes tidy with this server's notes resources and tools
metadata:
  origin: admin
---

# Note taking

1. Read the user's notes (`notes://{pk}`, listed by resources/list) before writing a new one.
2. Follow `examples/good-note.md`: a short title, then one idea per line.
"""

EXAMPLE = """# Groceries

- milk
- eggs
"""


class Command(BaseCommand):
    help = f"Create the demo skill {PATH!r} (served from the database) unless it exists."

    def handle(self, *args, **options):
        with transaction.atomic():
            skill, created = Skill.objects.get_or_create(path=PATH)
            if created:
                SkillFile(skill=skill, path="SKILL.md", content=SKILL_MD.encode()).save(refresh=False)
                SkillFile(skill=skill, path="examples/good-note.md", content=EXAMPLE.encode()).save(refresh=False)
                skill.refresh_manifest()
        self.stdout.write(f"{'Created' if created else 'Kept'} skill {PATH!r} (version {skill.version}).")
