"""Which skills a request sees (the catalog): hidden by scope, by organization and by the adapter
exactly like an unknown one; the extension announced only while a skill exists; an admin skill's
change told to the clients once per transaction."""

from __future__ import annotations

import pytest

from mcp_oauth.adapter import DefaultMCPAdapter
from mcp_oauth.mcp_server.skills.catalog import DATABASE_FLAG_KEY
from tests.support.organization_fixtures import acme, globex  # noqa: F401
from tests.support.organizations import bind
from tests.support.skills import EXTENSION, Legacy, Modern, admin_skill, by_uri

pytestmark = pytest.mark.django_db(transaction=True)


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
