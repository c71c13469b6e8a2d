"""The house's layers, measured from the code (issues 20 and 29): import cycles, layering (role
packages and top-level modules alike: no import climbs), deferred imports, module sizes, and the
architecture page that states them.

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

ROOT = Path(__file__).resolve().parents[1]
APPS = ("mcp_oauth", "elicitation")
ARCHITECTURE_PAGE = ROOT / "docs" / "explanation" / "architecture.md"

#: Function-level imports allowed in both apps together (issues 20, 29: only where Django's app
#: loading forces them: the two ``AppConfig.ready()`` methods and the MCP lane's view import).
MAX_FUNCTION_LEVEL_IMPORTS = 3

#: No module of either app is longer than this (lines; migrations aside).
MAX_MODULE_LINES = 600

#: The role packages of ``mcp_oauth`` and what each may import (besides itself, its own
#: sub-packages and the app's top-level modules: settings, errors, signals, ...).
ALLOWED_ROLE_IMPORTS = {
    "shared": set(),
    "models": {"shared"},
    "observability": {"shared", "models"},
    "dpop": {"shared", "models"},
    "resource_server": {"shared", "models", "dpop", "observability"},
    "mcp_server": {"shared", "models", "dpop", "resource_server", "observability"},
    "authorization_server": {"shared", "models", "dpop", "resource_server", "mcp_server", "observability"},
    "admin": {"shared", "models", "authorization_server", "resource_server", "mcp_server", "dpop", "observability"},
    "templatetags": {"shared", "authorization_server"},
    "management": {"shared", "models", "authorization_server", "resource_server", "mcp_server", "observability"},
}

#: The app's top-level modules every floor may import (its foundation), each with the role
#: packages it may import itself; they may import one another.
FOUNDATION_MODULES = {
    "defaults": set(),
    "settings": set(),
    "errors": set(),
    "signals": set(),
    "audit": {"shared", "models"},
}

#: The top-level composition modules: they assemble the floors and may import anything, and no
#: role package or foundation module imports one (a lower floor reads the adapter through the
#: settings object, ``mcp_oauth_settings.adapter``; each role owns its checks, registered here).
COMPOSITION_MODULES = {
    "adapter",
    "apps",
    "beat",
    "checks",
    "health",
    "retention",
    "site_modules",
    "tasks",
    "urls",
    "wiring",
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


def _top_level(name: str) -> str | None:
    """``adapter`` for ``mcp_oauth.adapter``: the name of a top-level module of mcp_oauth, else None."""
    parts = name.split(".")
    if parts[0] == "mcp_oauth" and len(parts) == 2 and _role(name) is None:
        return parts[1]
    return None


def _climbs(graph: dict[str, Module]) -> list[str]:
    """Every import of mcp_oauth that goes up: a role package importing a role above it or a
    composition module; a foundation module importing a role it may not, or a composition module."""
    wrong = []
    for module in graph.values():
        mine, my_top = _role(module.name), _top_level(module.name)
        if mine is None and (my_top is None or my_top in COMPOSITION_MODULES):
            continue  # the package itself, elicitation, or a composition module: may import anything
        allowed = ALLOWED_ROLE_IMPORTS.get(mine, set()) if mine else FOUNDATION_MODULES.get(my_top, set())
        for target in module.imports:
            theirs, their_top = _role(target), _top_level(target)
            if theirs is None:
                if their_top in COMPOSITION_MODULES:
                    wrong.append(f"{module.name} -> {target}")
                continue
            if theirs != mine and theirs not in allowed:
                wrong.append(f"{module.name} -> {target}")
    return sorted(wrong)


def test_every_top_level_module_has_its_rule(graph):
    tops = {_top_level(name) for name in graph} - {None}
    assert tops == set(FOUNDATION_MODULES) | COMPOSITION_MODULES


def test_no_import_climbs_role_packages_and_top_level_modules_alike(graph):
    assert _climbs(graph) == []


def test_the_climb_rule_sees_a_climb():
    """The rule on a made-up graph: a resource-server module importing the adapter, a foundation
    module importing a role it may not, and a lawful import."""
    fake = {
        name: Module(name, ROOT / "none.py", False)
        for name in (
            "mcp_oauth.resource_server.x",
            "mcp_oauth.adapter",
            "mcp_oauth.errors",
            "mcp_oauth.models.y",
            "mcp_oauth.mcp_server.z",
            "mcp_oauth.shared.w",
        )
    }
    fake["mcp_oauth.resource_server.x"].imports = {"mcp_oauth.adapter", "mcp_oauth.shared.w"}
    fake["mcp_oauth.errors"].imports = {"mcp_oauth.mcp_server.z"}
    fake["mcp_oauth.adapter"].imports = {"mcp_oauth.mcp_server.z"}
    assert _climbs(fake) == [
        "mcp_oauth.errors -> mcp_oauth.mcp_server.z",
        "mcp_oauth.resource_server.x -> mcp_oauth.adapter",
    ]


def test_role_packages_import_only_the_layers_below_them(graph):
    wrong = [climb for climb in _climbs(graph) if _role(climb.partition(" -> ")[0])]
    assert wrong == []


def test_no_module_is_longer_than_the_house_allows(graph):
    long = {name: _lines(module) for name, module in graph.items() if _lines(module) > MAX_MODULE_LINES}
    assert long == {}


def _lines(module: Module) -> int:
    return len(module.path.read_text().splitlines())


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


def _package_edges(graph: dict[str, Module]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for module in graph.values():
        for target in module.imports:
            mine, theirs = _package(module), _package(graph[target])
            if not (mine == theirs or mine.startswith(f"{theirs}.") or theirs.startswith(f"{mine}.")):
                edges[mine].add(theirs)
    return edges


def _stated(page: str, figure: str) -> str:
    found = re.search(rf"^\| {re.escape(figure)} \| (.+?) \|$", page, re.M)
    assert found, f"the architecture page states {figure!r}"
    return found.group(1)


def test_the_architecture_page_states_the_measured_figures(graph):
    """The page's "Measured" table says what this file measures: deferred imports, cycles,
    climbs and the largest module (so a change that moves one of them updates the page)."""
    page = ARCHITECTURE_PAGE.read_text()
    deferred = sum(len(module.function_level) for module in graph.values())
    module_cycles = _cycles({name: module.imports for name, module in graph.items()})
    largest = max(graph.values(), key=_lines)
    assert _stated(page, "imports inside functions (deferred)") == str(deferred)
    assert _stated(page, "import cycles between modules") == str(len(module_cycles))
    assert _stated(page, "import cycles between packages") == str(len(_cycles(_package_edges(graph))))
    assert _stated(page, "imports that climb") == str(len(_climbs(graph)))
    assert _stated(page, "largest module") == (
        f"`{largest.path.relative_to(ROOT)}`, {_lines(largest)} lines (limit {MAX_MODULE_LINES})"
    )
    assert _stated(page, "function-level imports allowed") == str(MAX_FUNCTION_LEVEL_IMPORTS)


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


# --- tests shaped like the package (issue 29) ----------------------------------------------------
# Self-contained: the modules of both apps and the test file each one is found by, by name.

#: Share of the apps' modules that have a test file at their mirrored path (issue 29).
MIN_MODULES_WITH_A_TEST_FILE = 0.80


def _only_re_exports(path: Path) -> bool:
    """An ``__init__.py`` that holds nothing but a docstring, imports and ``__all__``: no code to test."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if targets and all(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue
        return False
    return True


def mirrored_test_file(module: Path) -> Path:
    """Where the tests of ``module`` (a file of an app) are: ``tests/<its folder>/test_<name>.py``;
    for a package's ``__init__.py`` with code, ``tests/<the package>/test_<package name>.py``.

    ``mcp_oauth/authorization_server/tokens/rotation.py`` -> ``tests/mcp_oauth/authorization_server/tokens/test_rotation.py``;
    ``mcp_oauth/admin/__init__.py`` -> ``tests/mcp_oauth/admin/test_admin.py``.
    """
    parts = module.relative_to(ROOT).parts
    name = parts[-2] if module.name == "__init__.py" else module.stem
    return ROOT.joinpath("tests", *parts[:-1], f"test_{name}.py")


#: The line that marks a deprecated alias module left at an old path (issue 29, until 1.0):
#: ``authorization_server/client_secrets.py``, ``trust.py`` and ``registration.py``.
ALIAS_MARK = "# house_moves: alias"


def modules_to_test() -> list[Path]:
    """Every module of both apps, except migrations, ``__init__.py`` files that are empty or only
    re-export names (:func:`_only_re_exports`), and the deprecated alias modules (marked
    :data:`ALIAS_MARK`): they only re-export the new module's names with a ``DeprecationWarning``,
    and their one test is ``tests/mcp_oauth/authorization_server/test_moved_paths.py``."""
    found = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.relative_to(ROOT).parts:
                continue
            if path.name == "__init__.py" and _only_re_exports(path):
                continue
            if ALIAS_MARK in path.read_text():
                continue
            found.append(path)
    return found


def test_most_modules_have_a_test_file_named_after_them():
    modules = modules_to_test()
    without = [str(path.relative_to(ROOT)) for path in modules if not mirrored_test_file(path).is_file()]
    share = 1 - len(without) / len(modules)
    assert share >= MIN_MODULES_WITH_A_TEST_FILE, (
        f"{share:.0%} of {len(modules)} modules have a test file at their mirrored path "
        f"(tests/<folder>/test_<module>.py); without one:\n" + "\n".join(without)
    )


def test_every_test_folder_is_a_package():
    """tests/ is a package, and so is each folder in it: a ``tests/mcp_oauth`` without an
    ``__init__.py`` could shadow the real ``mcp_oauth`` on ``sys.path``."""
    skip = {"js", "node_modules", "__pycache__", "artifacts"}
    folders = [ROOT / "tests"] + [
        path
        for path in (ROOT / "tests").rglob("*")
        if path.is_dir() and not skip & set(path.relative_to(ROOT / "tests").parts) and any(path.glob("*.py"))
    ]
    assert [str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file()] == []
