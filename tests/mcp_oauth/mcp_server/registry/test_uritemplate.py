"""Unit tests of mcp_oauth.mcp_server.registry: URI templates, registration rules, value conversions."""

from __future__ import annotations

import asyncio

import pytest

from mcp_oauth.mcp_server.registry.context import RequestContext
from mcp_oauth.mcp_server.registry.resources import check_uri
from mcp_oauth.mcp_server.registry.uritemplate import InvalidTemplate, UriTemplate
from mcp_oauth.mcp_server.transport.jsonrpc import McpError

CTX = RequestContext(user=None, scopes=frozenset({"mcp"}))


def run(coro):
    return asyncio.run(coro)


# --- RFC 6570 levels 1-2 ---------------------------------------------------------------------


def test_simple_expansion_encodes_reserved_characters_and_matching_decodes_them():
    template = UriTemplate("files://{owner}/{name}")
    assert template.variables == ("owner", "name")
    uri = template.expand({"owner": "a b", "name": "x/y?"})
    assert uri == "files://a%20b/x%2Fy%3F"
    assert template.match(uri) == {"owner": "a b", "name": "x/y?"}
    assert template.match("files://a/b/c") is None  # a simple variable never spans "/"
    assert template.match("files://a/") is None  # nor is it empty
    assert template.match("other://a/b") is None


def test_reserved_and_fragment_expansion():
    reserved = UriTemplate("docs://{+path}")
    assert reserved.expand({"path": "a/b c"}) == "docs://a/b%20c"
    assert reserved.match("docs://guides/intro/setup.md") == {"path": "guides/intro/setup.md"}
    fragment = UriTemplate("page://home{#section}")
    assert fragment.expand({"section": "top/1"}) == "page://home#top/1"
    assert fragment.match("page://home#top/1") == {"section": "top/1"}


def test_one_reserved_expression_matches_long_uris():
    template = UriTemplate("x://{a}/{b}/{+rest}")
    assert template.match("x://1/2/" + "r/" * 1000) == {"a": "1", "b": "2", "rest": "r/" * 1000}
    assert template.match("x://" + "/" * 2040 + "q") is None


def test_literal_template_and_undecodable_escape():
    assert UriTemplate("a://b").is_literal
    assert UriTemplate("x://{v}").match("x://%FF") is None  # not UTF-8


@pytest.mark.parametrize(
    "template",
    [
        "x://{a,b}",
        "x://{.a}",
        "x://{/a}",
        "x://{?q}",
        "x://{a*}",
        "x://{a:3}",
        "x://{a}{b}",
        "x://{a}/{a}",
        "x://{",
        "x://}",
        "x://{}",
        "",
        "x://{+a}/{+b}",
        "x://{+a}/x{#b}",
    ],
)
def test_level_three_and_malformed_templates_are_refused(template):
    with pytest.raises(InvalidTemplate):
        UriTemplate(template)


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        (123, "must be a string"),
        ("", "is empty"),
        ("no-scheme", "no scheme"),
        ("a://b c", "whitespace"),
        ("a://b\x00", "control"),
        ("a://" + "x" * 3000, "longer than 2048"),
        ("a://" + "é" * 1100, "longer than 2048 bytes"),
    ],
)
def test_malformed_uris(uri, reason):
    with pytest.raises(McpError) as caught:
        check_uri(uri)
    assert caught.value.code == -32602
    assert caught.value.message.startswith("Malformed resource URI") and reason in caught.value.message


# --- settings and system checks ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "code"), [("RESOURCE_REGISTRY", "mcp_oauth.E023"), ("PROMPT_REGISTRY", "mcp_oauth.E024")]
)
@pytest.mark.parametrize(
    "path", ["no.such.module.registry", "mcp_oauth.settings.DEFAULTS", "mcp_oauth.mcp_server.tools.registry"]
)
def test_bad_resource_or_prompt_registry_is_an_error(settings, key, code, path):
    from mcp_oauth.checks import check_resource_and_prompt_registries

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, key: path}
    assert [message.id for message in check_resource_and_prompt_registries(None)] == [code]


def test_default_registries_pass_the_checks():
    from django.core.checks import run_checks

    from mcp_oauth.checks import check_resource_and_prompt_registries

    assert check_resource_and_prompt_registries(None) == []
    assert not {m.id for m in run_checks()} & {"mcp_oauth.E023", "mcp_oauth.E024"}


def test_demo_modules_are_autodiscovered():
    from mcp_oauth.mcp_server.registry.prompts import registry as prompts
    from mcp_oauth.mcp_server.registry.resources import registry as resources

    assert resources.get_resource("demo://readme") is not None
    assert resources.get_template("notes://{pk}") is not None
    assert "summarize_note" in prompts
