"""The house's layers, measured from the code (issue 20): import cycles, layering, deferred imports.

Every ``import`` of the two apps is read with :mod:`ast` (function-level ones included, ``if
TYPE_CHECKING:`` blocks left out) into a module graph; the assertions below are about that graph,
so they fail on the import that breaks a rule, whatever the import style.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ("mcp_oauth", "elicitation")
ARCHITECTURE_PAGE = ROOT / "docs" / "explanation" / "architecture.md"

#: Function-level imports allowed in both apps together (issue 20: only where Django's app
#: loading forces them).
MAX_FUNCTION_LEVEL_IMPORTS = 15

#: The role packages of ``mcp_oauth`` and what each may import (besides itself, its own
#: sub-packages and the app's top-level modules: settings, errors, signals, ...).
ALLOWED_ROLE_IMPORTS = {
    "shared": set(),
    "models": {"shared"},
    "dpop": {"shared", "models"},
    "observability": {"shared", "models"},
    "resource_server": {"shared", "models", "dpop", "observability"},
    "mcp_server": {"shared", "models", "dpop", "resource_server", "observability"},
    "authorization_server": {"shared", "models", "dpop", "resource_server", "mcp_server", "observability"},
    "admin": {"shared", "models", "authorization_server", "resource_server", "mcp_server", "dpop", "observability"},
    "templatetags": {"shared", "authorization_server"},
    "management": {"shared", "models", "authorization_server", "resource_server", "mcp_server", "observability"},
}


class Module:
    def __init__(self, name: str, path: Path, is_package: bool) -> None:
        self.name, self.path, self.is_package = name, path, is_package
        self.imports: set[str] = set()
        self.function_level: list[str] = []


def _modules() -> dict[str, Module]:
    found = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            if "migrations" in rel.parts:
                continue
            parts = list(rel.parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            found[".".join(parts)] = Module(".".join(parts), path, is_package)
    return found


def _in_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def _in_function(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return True
    return False


def _targets(module: Module, node: ast.Import | ast.ImportFrom, known: dict[str, Module]) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.name if module.is_package else module.name.rpartition(".")[0]
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = base + (f".{node.module}" if node.module else "")
        else:
            target = node.module or ""
        names = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target for a in node.names]
    resolved = []
    for name in names:
        if name.split(".")[0] not in APPS:
            continue
        while name not in known and "." in name:
            name = name.rpartition(".")[0]
        if name in known and name != module.name:
            resolved.append(name)
    return resolved


@pytest.fixture(scope="module")
def graph() -> dict[str, Module]:
    known = _modules()
    for module in known.values():
        tree = ast.parse(module.path.read_text(), str(module.path))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or _in_type_checking(node, parents):
                continue
            targets = _targets(module, node, known)
            module.imports.update(targets)
            if targets and _in_function(node, parents):
                module.function_level.append(f"{module.path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    return known


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _package(module: Module) -> str:
    return module.name if module.is_package else module.name.rpartition(".")[0]


def _role(name: str) -> str | None:
    """``mcp_oauth.<role>`` for a module inside a role package, None for a top-level module."""
    parts = name.split(".")
    if parts[0] != "mcp_oauth" or len(parts) < 3 and not (ROOT / "mcp_oauth" / parts[-1]).is_dir():
        return None
    return parts[1]


def test_the_scan_reads_the_apps(graph):
    """A scan that found nothing would pass everything below."""
    assert len(graph) > 100
    assert "mcp_oauth.mcp_server.transport.asgi" in graph
    assert "mcp_oauth.settings" in graph["mcp_oauth.mcp_server.transport.asgi"].imports


def test_no_module_import_cycles_counting_function_level_imports(graph):
    edges = {name: module.imports for name, module in graph.items()}
    assert _cycles(edges) == []


def test_no_package_imports_a_package_that_imports_it_back(graph):
    edges: dict[str, set[str]] = defaultdict(set)
    for module in graph.values():
        for target in module.imports:
            mine, theirs = _package(module), _package(graph[target])
            if mine == theirs or mine.startswith(f"{theirs}.") or theirs.startswith(f"{mine}."):
                continue
            edges[mine].add(theirs)
    two_way = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a] if a in edges.get(b, ())})
    assert two_way == []
    assert _cycles(edges) == []


def test_role_packages_import_only_the_layers_below_them(graph):
    wrong = []
    for module in graph.values():
        mine = _role(module.name)
        if mine is None:
            continue
        for target in module.imports:
            theirs = _role(target)
            if theirs is None or theirs == mine:
                continue
            if theirs not in ALLOWED_ROLE_IMPORTS.get(mine, set()):
                wrong.append(f"{module.name} -> {target}")
    assert wrong == []


def test_mcp_transport_core_does_not_import_the_features(graph):
    """Transport first, features (tools, resources, prompts, tasks) on top of it: the composition
    module assembles the method table, so the core never imports a feature."""
    features = ("mcp_oauth.mcp_server.registry", "mcp_oauth.mcp_server.mcp_tasks", "mcp_oauth.mcp_server.tools")
    wrong = [
        f"{name} -> {target}"
        for name, module in graph.items()
        if name.startswith("mcp_oauth.mcp_server.transport")
        for target in module.imports
        if target.startswith(features)
    ]
    assert wrong == []


def test_mcp_oauth_never_imports_elicitation(graph):
    wrong = [
        f"{name} -> {target}"
        for name, module in graph.items()
        if name.startswith("mcp_oauth")
        for target in module.imports
        if target.startswith("elicitation")
    ]
    assert wrong == []


def test_function_level_imports_only_where_app_loading_forces_them(graph):
    deferred = sorted(line for module in graph.values() for line in module.function_level)
    assert len(deferred) <= MAX_FUNCTION_LEVEL_IMPORTS, "\n".join(deferred)


def test_one_meaning_per_file_name():
    """No module named like a sibling package's convention file with another meaning (issue 20)."""
    for app in APPS:
        names = {p.stem for p in (ROOT / app).glob("*.py")}
        assert not ({"url", "urls"} <= names)
    assert not list((ROOT / "mcp_oauth").rglob("registry/models.py"))


def test_the_architecture_page_names_every_package_and_module(graph):
    page = ARCHITECTURE_PAGE.read_text()
    tree = re.search(r"```\n(mcp_oauth/.*?)```", page, re.S)
    assert tree, "the architecture page has its source tree"
    text = tree.group(1)
    missing = []
    for name, module in graph.items():
        last = name.rpartition(".")[2]
        if module.is_package:
            if f"{last}/" not in text:
                missing.append(f"{name} (package)")
        elif last != "__init__" and f"{last}.py" not in text:
            missing.append(name)
    assert missing == []
