"""What a package index page and a new user see (issue 29): the README's links, the license,
the project URLs, the order of the how-to guides and the imports of each guide's first example.

The built artifacts themselves (the wheel's ``LICENSE``, its metadata) are checked by the nox
``release`` session (noxfile.py), which builds them.
"""

from __future__ import annotations

import ast
import builtins
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
REPOSITORY = "https://github.com/django-mcp-authz/django-mcp-authz"

#: Link targets in Markdown and HTML: inline links and images, reference definitions, href/src.
LINK_TARGETS = (
    re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)"),
    re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE),
    re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.IGNORECASE),
)


def link_targets(markdown: str) -> list[str]:
    text = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)  # code blocks hold no links
    text = re.sub(r"`[^`\n]*`", "", text)  # nor inline code
    return [match for pattern in LINK_TARGETS for match in pattern.findall(text)]


def test_the_link_finder_sees_every_kind_of_relative_link():
    sample = '[a](docs/x.md) ![b](img.png) <a href="SECURITY.md">c</a>\n[d]: ../y.md\n`[e](not-a-link.md)`'
    assert link_targets(sample) == ["docs/x.md", "img.png", "../y.md", "SECURITY.md"]


def test_the_readme_has_no_relative_link():
    """A package index page renders the README away from the repository: every link is absolute,
    into the repository's default branch."""
    targets = link_targets((ROOT / "README.md").read_text())
    assert len(targets) >= 30
    relative = [target for target in targets if not target.startswith("https://")]
    assert relative == []
    own = [target for target in targets if target.startswith(REPOSITORY)]
    assert all(target.startswith(f"{REPOSITORY}/blob/main/") for target in own), own


def test_the_readmes_links_into_the_repository_name_files_that_exist():
    targets = link_targets((ROOT / "README.md").read_text())
    paths = [target.removeprefix(f"{REPOSITORY}/blob/main/").split("#")[0] for target in targets]
    missing = [
        path
        for path, target in zip(paths, targets, strict=True)
        if target.startswith(REPOSITORY) and not (ROOT / path).is_file()
    ]
    assert missing == []
    assert "docs/how-to/install.md" in paths and "LICENSE" in paths


def test_the_license_is_bsd_3_clause_and_ships_with_the_distribution():
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License\n\nCopyright (c) 2026, the django-mcp-authz authors\n")
    assert "3. Neither the name of the copyright holder nor the names of its" in text
    assert PYPROJECT["license"] == "BSD-3-Clause"
    assert PYPROJECT["license-files"] == ["LICENSE"]


def test_the_project_urls_point_at_the_projects_own_repository():
    urls = PYPROJECT["urls"]
    assert urls == {
        "Homepage": REPOSITORY,
        "Documentation": f"{REPOSITORY}/tree/main/docs",
        "Source": REPOSITORY,
        "Issues": f"{REPOSITORY}/issues",
        "Changelog": f"{REPOSITORY}/blob/main/docs/changelog.md",
    }
    assert (DOCS / "changelog.md").is_file()


# --- the how-to guides ----------------------------------------------------------------------


def how_to_toctree() -> list[str]:
    index = (DOCS / "index.md").read_text()
    block = re.search(r"```\{toctree\}\n:caption: How-to guides\n(.*?)```", index, re.DOTALL)
    assert block, "no How-to guides toctree"
    return [line for line in block.group(1).splitlines() if line and not line.startswith(":")]


def test_the_how_to_guides_are_listed_in_a_readers_order():
    listed = how_to_toctree()
    assert sorted(listed) == sorted(f"how-to/{path.stem}" for path in (DOCS / "how-to").glob("*.md"))
    assert listed[:5] == [
        "how-to/install",
        "how-to/existing-site",
        "how-to/write-tools",
        "how-to/resources-and-prompts",
        "how-to/connect-clients",
    ]
    assert listed[-2:] == ["how-to/production", "how-to/data-lifecycle"]


#: Names a first example may use without defining them: what the page says stands for the
#: reader's own (a settings module's names, a client's storage and key).
PLACEHOLDERS = {
    "INSTALLED_APPS",
    "urlpatterns",
    "DATABASES",
    "path",  # the tutorial's urls.py edit: startproject's urls.py imports it
    "client_id",  # enterprise-identity: the client's id, key and token storage
    "pem",
    "storage",
    "my_token_storage",  # python-client: the reader's token storage and form answerer
    "answer_forms",
}


def first_python_example(page: Path) -> str | None:
    match = re.search(r"^([ \t]*)```python\n(.*?)^[ \t]*```", page.read_text(), re.MULTILINE | re.DOTALL)
    if match is None:
        return None
    indent = match.group(1)
    return "\n".join(line.removeprefix(indent) for line in match.group(2).splitlines())


def undefined_names(code: str) -> set[str]:
    """Names the code loads that it neither imports, assigns, defines nor takes as a parameter."""
    tree = ast.parse(code)
    bound: set[str] = set(dir(builtins))
    loaded: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else loaded).add(node.id)
    return loaded - bound


PAGES = sorted([*(DOCS / "how-to").glob("*.md"), DOCS / "tutorial.md"])


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.stem)
def test_each_guides_first_example_has_its_imports(page):
    code = first_python_example(page)
    if code is None:
        pytest.skip(f"{page.name} has no Python example")
    assert undefined_names(code) - PLACEHOLDERS == set()


def test_the_import_finder_sees_a_missing_import():
    assert undefined_names(
        '@tool(scopes=["mcp"])\nasync def add(ctx: ToolContext, a: int) -> int:\n    return a\n'
    ) == {
        "tool",
        "ToolContext",
    }
