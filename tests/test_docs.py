"""The documentation (``docs/``) against the code: settings tables, system-check ids, and the
code samples, which run here.

A ```` ```python ```` block preceded by an HTML comment ``<!-- docs-test: … -->`` is a sample this
module executes (docs/contributing.md lists the kinds). The short form names the kind and, for
tools, the tools to call with no arguments; the long form is a JSON object:
``<!-- docs-test: {"kind": "tools", "calls": [{"tool": "add", "arguments": {"a": 2, "b": 3}, "expect": "5"}]} -->``.
Tools, resources and prompts are registered on fresh registries that the endpoint serves for the
test, and called over HTTP with MCP 2026-07-28 requests and a real token.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.checks import Error, run_checks

import mcp_oauth.mcp_server.registry as registry_package
import mcp_oauth.mcp_server.registry.prompts as prompts_module
import mcp_oauth.mcp_server.registry.resources as resources_module
import mcp_oauth.mcp_server.tools as tools_module
from elicitation.settings import DEFAULTS as ELICITATION_DEFAULTS
from mcp_oauth.mcp_server.registry.prompts import PromptRegistry
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry
from mcp_oauth.mcp_server.tools import ToolContext, ToolRegistry
from mcp_oauth.settings import DEFAULTS as MCP_OAUTH_DEFAULTS
from mcp_oauth.settings import DOT_SECURE_DEFAULTS
from tests.mcp_oauth.mcp_server.transport.test_modern import body, call_tool, post, result_of

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SETTINGS_PAGE = DOCS / "reference" / "settings.md"
CHECKS_PAGE = DOCS / "reference" / "checks.md"
APPS = ("mcp_oauth", "elicitation")

MARKER = re.compile(
    r"^[ \t]*<!-- docs-test: (?P<spec>.*?) -->[ \t]*\n(?:[ \t]*\n)*(?P<indent>[ \t]*)```python\n", re.MULTILINE
)


# --- settings -------------------------------------------------------------------------------


def table_rows(section: str) -> list[list[str]]:
    """The cells of every row of the Markdown tables in ``section`` (escaped ``\\|`` kept in a cell)."""
    rows = []
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith("| ---"):
            continue
        cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        rows.append(cells)
    return rows


def section_of(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + len(heading) + 2)
    return text[start : end if end != -1 else len(text)]


def documented_settings(heading: str) -> dict[str, Any]:
    """``{key: default}`` of the settings table under ``heading``; each default cell is one Python literal."""
    found: dict[str, Any] = {}
    for cells in table_rows(section_of(SETTINGS_PAGE.read_text(), heading))[1:]:
        key = re.fullmatch(r"`([A-Z][A-Z0-9_]*)`", cells[0])
        assert key, cells
        literal = re.fullmatch(r"`(.*)`", cells[1])
        assert literal, cells
        assert key.group(1) not in found, f"{key.group(1)} is documented twice"
        found[key.group(1)] = ast.literal_eval(literal.group(1))
    return found


@pytest.mark.parametrize(
    ("heading", "defaults"),
    [("## `MCP_OAUTH`", MCP_OAUTH_DEFAULTS), ("## `ELICITATION`", ELICITATION_DEFAULTS)],
    ids=["MCP_OAUTH", "ELICITATION"],
)
def test_every_setting_is_documented_with_its_default(heading, defaults):
    documented = documented_settings(heading)
    assert sorted(set(defaults) - set(documented)) == [], "undocumented settings"
    assert sorted(set(documented) - set(defaults)) == [], "documented settings that do not exist"
    wrong = {key: (documented[key], defaults[key]) for key in defaults if documented[key] != defaults[key]}
    assert wrong == {}, "documented default differs from DEFAULTS (documented, actual)"


def test_every_dot_default_the_app_sets_is_documented():
    section = section_of(SETTINGS_PAGE.read_text(), "## `OAUTH2_PROVIDER`: django-oauth-toolkit, secure by default")
    documented = [re.fullmatch(r"`([A-Z0-9_]+)`", cells[0]).group(1) for cells in table_rows(section)[1:]]
    assert sorted(documented) == sorted(DOT_SECURE_DEFAULTS)


# --- system checks --------------------------------------------------------------------------


def check_ids_in_the_code() -> set[str]:
    """Every check id the two apps can emit: literal ids, and the codes built as ``f"mcp_oauth.{code}"``."""
    ids: set[str] = set()
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            text = path.read_text()
            ids.update(re.findall(r'id="((?:mcp_oauth|elicitation)\.[EWIC]\d{3})"', text))
            if 'id=f"mcp_oauth.{code}"' in text:
                ids.update(f"mcp_oauth.{code}" for code in re.findall(r'"([EWIC]\d{3})"\)', text))
    return ids


def test_the_checks_page_lists_every_check_id_and_no_other():
    in_code = check_ids_in_the_code()
    assert {"mcp_oauth.E001", "mcp_oauth.E023", "mcp_oauth.E024", "elicitation.E004"} <= in_code
    documented = {cells[0].strip("`") for cells in table_rows(CHECKS_PAGE.read_text()) if cells[0] != "id"}
    assert sorted(in_code - documented) == [], "check ids missing from docs/reference/checks.md"
    assert sorted(documented - in_code) == [], "documented check ids the code never emits"


# --- code samples ---------------------------------------------------------------------------


@dataclass
class Sample:
    page: str
    line: int
    spec: dict[str, Any]
    code: str = field(repr=False)

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def parse_spec(text: str) -> dict[str, Any]:
    if text.startswith("{"):
        return json.loads(text)
    kind, *names = text.split()
    return {"kind": kind, "calls": [{"tool": name} for name in names]}


def samples() -> list[Sample]:
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        if "_build" in path.parts:
            continue
        text = path.read_text()
        for match in MARKER.finditer(text):
            start = match.end()
            end = text.index(f"{match.group('indent')}```", start)
            code = textwrap.dedent(text[start:end])
            line = text.count("\n", 0, match.start()) + 1
            found.append(Sample(str(path.relative_to(DOCS)), line, parse_spec(match.group("spec")), code))
    return found


SAMPLES = samples()


def test_the_marked_samples_are_found():
    kinds = {sample.spec["kind"] for sample in SAMPLES}
    assert {"tools", "resources", "prompts", "settings", "import"} <= kinds, kinds


@pytest.fixture
def fresh_registries(settings, monkeypatch):
    """Empty tool, resource and prompt registries, served by the endpoint and filled by ``@tool``,
    ``@resource``, ``@resource_template`` and ``@prompt`` in the samples."""
    tools, resources, prompts = ToolRegistry("docs"), ResourceRegistry("docs"), PromptRegistry("docs")
    monkeypatch.setattr(tools_module, "registry", tools)
    monkeypatch.setattr(tools_module, "tool", tools.tool)
    monkeypatch.setattr(resources_module, "registry", resources)
    monkeypatch.setattr(resources_module, "resource", resources.resource)
    monkeypatch.setattr(resources_module, "resource_template", resources.resource_template)
    monkeypatch.setattr(prompts_module, "registry", prompts)
    monkeypatch.setattr(prompts_module, "prompt", prompts.prompt)
    # ``from mcp_oauth.mcp_server.registry import resource, prompt`` (the samples): the package's own names
    monkeypatch.setattr(registry_package, "resource", resources.resource)
    monkeypatch.setattr(registry_package, "resource_template", resources.resource_template)
    monkeypatch.setattr(registry_package, "prompt", prompts.prompt)
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "TOOL_REGISTRY": tools,
        "RESOURCE_REGISTRY": resources,
        "PROMPT_REGISTRY": prompts,
    }
    return tools, resources, prompts


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, resource=resource.uri)


def run_sample(sample: Sample, namespace: dict[str, Any] | None = None) -> dict[str, Any]:
    scope: dict[str, Any] = {"__name__": f"docs_sample_{sample.line}", **(namespace or {})}
    exec(compile(sample.code, str(sample), "exec"), scope)  # the documentation's own code
    return scope


def text_of(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result.get("content", []))


@pytest.mark.parametrize("sample", [s for s in SAMPLES if s.spec["kind"] == "tools"], ids=str)
def test_tool_sample_runs(sample, fresh_registries, client, token):
    tools, _, _ = fresh_registries
    run_sample(sample, {"tool": tools.tool, "ToolContext": ToolContext})
    assert len(tools) > 0, "the sample registers no tool"
    for call in sample.spec.get("calls", []):
        name, arguments = call["tool"], call.get("arguments", {})
        caps = call.get("capabilities")
        result = result_of(call_tool(client, token, name, arguments, caps=caps))
        if "answers" in call:
            assert result["resultType"] == "input_required", result
            assert sorted(result["inputRequests"]) == sorted(call["answers"]), result["inputRequests"]
            result = result_of(
                call_tool(
                    client,
                    token,
                    name,
                    arguments,
                    id=2,
                    caps=caps,
                    requestState=result["requestState"],
                    inputResponses=call["answers"],
                )
            )
        assert result["resultType"] == "complete", result
        assert not result.get("isError"), result
        if "expect" in call:
            assert text_of(result) == call["expect"], result


@pytest.mark.parametrize("sample", [s for s in SAMPLES if s.spec["kind"] in ("resources", "prompts")], ids=str)
def test_resource_and_prompt_samples_run(sample, fresh_registries, client, token):
    _, resources, prompts = fresh_registries
    run_sample(sample)
    assert len(resources) + len(prompts) > 0, "the sample registers nothing"
    for uri, expected in sample.spec.get("reads", {}).items():
        result = result_of(post(client, token, body("resources/read", {"uri": uri}), **{"Mcp-Name": uri}))
        texts = [entry.get("text", "") for entry in result["contents"]]
        assert any(expected in text for text in texts), result
    for get in sample.spec.get("gets", []):
        message = body("prompts/get", {"name": get["name"], "arguments": get["arguments"]})
        result = result_of(post(client, token, message, **{"Mcp-Name": get["name"]}))
        texts = [message["content"].get("text", "") for message in result["messages"]]
        assert get["expect"] in texts, result
    for method in ("resources/list", "resources/templates/list", "prompts/list"):
        result_of(post(client, token, body(method)))


@pytest.mark.parametrize("sample", [s for s in SAMPLES if s.spec["kind"] == "settings"], ids=str)
def test_settings_sample_is_valid(sample, settings, monkeypatch, db):
    monkeypatch.setenv("ELICITATION_KEY", Fernet.generate_key().decode())
    scope = run_sample(
        sample, {"INSTALLED_APPS": [], "urlpatterns": [], "path": lambda *a, **k: None, "include": lambda *a, **k: None}
    )
    named = {name: scope[name] for name in ("MCP_OAUTH", "ELICITATION") if name in scope}
    assert named, "the sample sets neither MCP_OAUTH nor ELICITATION"
    for name, defaults in (("MCP_OAUTH", MCP_OAUTH_DEFAULTS), ("ELICITATION", ELICITATION_DEFAULTS)):
        if name in named:
            assert sorted(set(named[name]) - set(defaults)) == [], f"unknown {name} keys"
    if "MCP_OAUTH" in named:
        settings.MCP_OAUTH = {**settings.MCP_OAUTH, **named["MCP_OAUTH"]}
    if "ELICITATION" in named:
        settings.ELICITATION = named["ELICITATION"]
    errors = [m for m in run_checks() if isinstance(m, Error) and m.id.startswith(APPS)]
    assert errors == []


@pytest.mark.parametrize("sample", [s for s in SAMPLES if s.spec["kind"] == "import"], ids=str)
def test_fragment_sample_imports(sample, fresh_registries):
    run_sample(sample)
