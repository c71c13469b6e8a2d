"""No migration churn: the committed migrations of both apps match their models on the Django
that runs the tests (the primary pair's full suite and every other supported pair: noxfile.py)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
@pytest.mark.parametrize("app", ["mcp_oauth", "elicitation"])
def test_the_models_need_no_new_migration(app):
    out = StringIO()
    call_command("makemigrations", app, "--check", "--dry-run", stdout=out)  # exits 1 on churn
    assert out.getvalue() == f"No changes detected in app '{app}'\n"
