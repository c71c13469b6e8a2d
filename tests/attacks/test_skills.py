"""Attacks on the Skills extension: path traversal in skill URIs, symbolic links out of a skill,
hidden skills told apart from unknown ones, huge files and skills, malformed params. Every answer
is the spec's ``-32602`` (never a 500, never a byte from outside a listed file)."""

from __future__ import annotations

import os

import pytest

from mcp_oauth.mcp_server.skills import sources
from tests.support.organization_fixtures import acme, globex  # noqa: F401
from tests.support.organizations import bind
from tests.support.skills import Legacy, Modern, admin_skill, write_folder_skill

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = b"SECRET_KEY = 'do-not-leak'\n"


@pytest.fixture
def root(settings, tmp_path):
    skills = tmp_path / "skills"
    skills.mkdir()
    (tmp_path / "settings.py").write_bytes(SECRET)
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SKILL_DIRS": [str(skills)]}
    write_folder_skill(skills, "guide")
    return skills


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, scope="mcp", resource=resource.uri)


TRAVERSALS = [
    "skill://guide/../../settings.py",
    "skill://guide/../settings.py",
    "skill://guide/%2e%2e/%2e%2e/settings.py",
    "skill://guide/references/../SKILL.md",
    "skill://guide/./SKILL.md",
    "skill://guide//SKILL.md",
    "skill://guide/references\\..\\..\\settings.py",
    "skill://../settings.py",
    "skill://guide/SKILL.md?x=1",
    "skill://guide/SKILL.md#frag",
    "skill:///etc/passwd",
    "skill://guide/" + "a/" * 600 + "SKILL.md",
]


@pytest.mark.parametrize("uri", TRAVERSALS)
def test_traversal_in_a_file_uri_is_resource_not_found(root, token, uri):
    error = Legacy(token).call("resources/read", {"uri": uri})["error"]
    assert error["code"] == -32602
    assert error["message"].startswith(("Resource not found: ", "Malformed resource URI"))
    assert "do-not-leak" not in str(error)


@pytest.mark.parametrize("uri", TRAVERSALS)
def test_traversal_in_skills_get_and_directory_read(root, token, uri):
    client = Modern(token)
    for method in ("skills/get", "resources/directory/read"):
        body = client.call(method, {"uri": uri})
        assert (body["_status"], body["error"]["code"]) == (400, -32602), (method, body)


def test_a_symbolic_link_never_brings_an_outside_file_into_a_skill(root, token, tmp_path):
    os.symlink(tmp_path / "settings.py", root / "guide" / "settings.py")
    os.symlink(tmp_path, root / "guide" / "outside")
    session = Legacy(token)
    entry = session.call("skills/get", {"uri": "skill://guide/SKILL.md"})["result"]["skill"]
    assert [r["uri"] for r in entry["resources"]] == ["skill://guide/SKILL.md", "skill://guide/references/DETAILS.md"]
    for uri in ("skill://guide/settings.py", "skill://guide/outside/settings.py"):
        error = session.call("resources/read", {"uri": uri})["error"]
        assert (error["code"], error["message"]) == (-32602, f"Resource not found: {uri}")


def test_a_hidden_skill_answers_word_for_word_like_an_unknown_one(
    root, acme, globex, user, resource, public_app, mint_token
):
    admin_skill("acme/runbook", organizations=[acme])
    admin_skill("secret/runbook", required_scopes="admin")
    outsider = mint_token(user, public_app, scope="mcp", resource=resource.uri)
    bind(outsider, globex)
    client = Modern(outsider)

    def shape(method: str, uri: str) -> tuple:
        body = client.call(method, {"uri": uri})
        error = body["error"]
        return (
            body["_status"],
            error["code"],
            error["message"].replace(uri, "<uri>"),
            str(error.get("data")).replace(uri, "<uri>"),
        )

    for hidden, unknown in (
        ("skill://acme/runbook/SKILL.md", "skill://acme/nothing/SKILL.md"),
        ("skill://secret/runbook/SKILL.md", "skill://secret/nothing/SKILL.md"),
    ):
        assert shape("skills/get", hidden) == shape("skills/get", unknown)
        hidden_file = hidden.replace("SKILL.md", "examples/page.md")
        assert shape("resources/read", hidden_file) == shape("resources/read", unknown)
        assert shape("resources/directory/read", hidden.rsplit("/", 1)[0]) == shape(
            "resources/directory/read", unknown.rsplit("/", 1)[0]
        )
    # the prefix directory above hidden skills is no directory either
    assert shape("resources/directory/read", "skill://acme") == shape("resources/directory/read", "skill://nothing")
    assert shape("resources/directory/read", "skill://secret") == shape("resources/directory/read", "skill://nothing")
    listed = {entry["uri"] for entry in client.call("skills/list")["result"]["skills"]}
    assert listed == {"skill://guide/SKILL.md", "skill://release-notes/SKILL.md"}


def test_a_huge_file_is_never_read_and_its_skill_not_served(settings, root, token):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SKILL_MAX_BYTES": 4096}
    huge = write_folder_skill(
        root, "huge", {"SKILL.md": b"---\nname: huge\ndescription: d\n---\n", "blob.bin": b"\0" * 10_000}
    )
    session = Legacy(token)
    listed = {entry["uri"] for entry in session.call("skills/list")["result"]["skills"]}
    assert "skill://huge/SKILL.md" not in listed and "skill://guide/SKILL.md" in listed
    assert str(huge / "blob.bin") not in sources._digests  # refused on its size, before any read
    for uri in ("skill://huge/SKILL.md", "skill://huge/blob.bin"):
        assert session.call("resources/read", {"uri": uri})["error"]["code"] == -32602


def test_a_file_grown_after_the_listing_is_refused_not_sent(settings, root, token):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SKILL_MAX_BYTES": 4096}
    session = Legacy(token)
    assert session.call("resources/read", {"uri": "skill://guide/references/DETAILS.md"})["result"]["contents"]
    (root / "guide" / "references" / "DETAILS.md").write_bytes(b"x" * 50_000)
    error = session.call("resources/read", {"uri": "skill://guide/references/DETAILS.md"})["error"]
    assert error["code"] == -32602
    assert "xxxx" not in str(error)


def test_too_many_files_and_too_many_bytes_in_all(settings, root, token):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SKILL_MAX_FILES": 3, "SKILL_MAX_BYTES": 1000}
    many = {"SKILL.md": b"---\nname: many\ndescription: d\n---\n", **{f"f{i}.md": b"x" for i in range(3)}}
    write_folder_skill(root, "many", many)
    heavy = {"SKILL.md": b"---\nname: heavy\ndescription: d\n---\n", "a.md": b"a" * 600, "b.md": b"b" * 600}
    write_folder_skill(root, "heavy", heavy)
    listed = {entry["uri"] for entry in Legacy(token).call("skills/list")["result"]["skills"]}
    assert "skill://many/SKILL.md" not in listed and "skill://heavy/SKILL.md" not in listed


@pytest.mark.parametrize("params", [{}, {"uri": 7}, {"uri": ""}, {"uri": ["skill://guide/SKILL.md"]}, {"uri": None}])
def test_malformed_params_are_invalid_params(root, token, params):
    for method in ("skills/get", "resources/directory/read"):
        body = Modern(token).call(method, params)
        assert (body["_status"], body["error"]["code"]) == (400, -32602), (method, params)
    body = Modern(token).call("skills/list", {"cursor": 12})
    assert (body["_status"], body["error"]["code"]) == (400, -32602)


def test_hostile_front_matter_is_not_served(root, token):
    bombs = {
        "alias-bomb": b"---\nname: alias-bomb\ndescription: d\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n---\n",
        "python-tag": b"---\nname: python-tag\ndescription: !!python/object/apply:os.system ['true']\n---\n",
        "not-finite": b"---\nname: not-finite\ndescription: d\nratio: .inf\n---\n",
        "list-root": b"---\n- name\n- description\n---\n",
    }
    for name, data in bombs.items():
        write_folder_skill(root, name, {"SKILL.md": data})
    listed = {entry["uri"] for entry in Legacy(token).call("skills/list")["result"]["skills"]}
    assert not {u for u in listed if any(name in u for name in bombs if name != "alias-bomb")}
