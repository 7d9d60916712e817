"""The package's import graph holds the layering of DESIGN §9 (docs/design.md, "The house").

Every module under mcqaudit/ is parsed with ``ast`` (nothing is imported or run); every import counts, the
ones inside functions and under ``if TYPE_CHECKING:`` too, with relative imports resolved. Each module is
assigned to a layer by its dotted name (:data:`LAYERS`, top to bottom):

1. faces: the CLI, ``python -m mcqaudit``, the dashboard, the Inspect extension. A face imports only
   ``app/`` and the pure core (and other faces).
2. use cases: ``app/``, the demo.
3. services: grading, generation, the Inspect log editor.
4. adapters: ``store/`` (the only importer of duckdb), the file readers of ``ingest/``, the endpoint and the
   judge client, files, the terminal, process tuning, the stand-in server.
5. the pure core: no I/O, none of duckdb/openai/httpx/aiohttp/streamlit/subprocess/socket.

A module imports only from its own layer or below, and no module takes part in an import cycle. The
checker is tried on a small synthetic package first (``test_the_checker_*``), so the test can fail.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "mcqaudit"

FACE, USE_CASE, SERVICE, ADAPTER, PURE = 1, 2, 3, 4, 5
LAYER_NAMES = {
    FACE: "a face (layer 1)",
    USE_CASE: "a use case (layer 2)",
    SERVICE: "a service (layer 3)",
    ADAPTER: "an adapter (layer 4)",
    PURE: "the pure core (layer 5)",
}

# dotted name (a module, or a package and everything under it) -> layer; the longest matching name decides
LAYERS: dict[str, int] = {
    "mcqaudit.cli": FACE,
    "mcqaudit.__main__": FACE,
    "mcqaudit.ui": FACE,
    "mcqaudit.inspect": FACE,
    "mcqaudit.app": USE_CASE,
    "mcqaudit.demo": USE_CASE,
    "mcqaudit.grade": SERVICE,
    "mcqaudit.generate": SERVICE,
    "mcqaudit.inspect_edits": SERVICE,
    "mcqaudit.store": ADAPTER,
    "mcqaudit.ingest": ADAPTER,
    "mcqaudit.endpoint": ADAPTER,
    "mcqaudit.judge.client": ADAPTER,
    "mcqaudit.files": ADAPTER,
    "mcqaudit.native": ADAPTER,
    "mcqaudit.standin": ADAPTER,
    "mcqaudit": PURE,  # the package itself (its version)
    "mcqaudit.vocab": PURE,
    "mcqaudit.bulk": PURE,
    "mcqaudit.orient": PURE,
    "mcqaudit.parsers": PURE,
    "mcqaudit.reasoning": PURE,
    "mcqaudit.formatting": PURE,
    "mcqaudit.svgplot": PURE,
    "mcqaudit.plots": PURE,
    "mcqaudit.report": PURE,
    "mcqaudit.metrics": PURE,
    "mcqaudit.review": PURE,
    "mcqaudit.judge": PURE,  # the package: prompts and replies are pure, the client is an adapter
    "mcqaudit.judge.prompts": PURE,
    "mcqaudit.judge.replies": PURE,
    "mcqaudit.ingest.errors": PURE,
    "mcqaudit.ingest.fields": PURE,
    "mcqaudit.reading": PURE,
    "mcqaudit.terminal": PURE,  # text -> the characters it is, escaped (no I/O)
}
# Modules a face may import besides app/, the pure core and other faces: writing the output file a person
# named on the command line, whole or not at all (files.write_atomic), is the face's own job.
FACE_MAY_ALSO_IMPORT: tuple[str, ...] = ("mcqaudit.files",)
# Third-party and standard modules, by their top-level name, and who alone may import them.
ONLY_IMPORTED_BY = {"duckdb": ("mcqaudit.store",), "streamlit": ("mcqaudit.ui",)}
NOT_IN_THE_PURE_CORE = ("duckdb", "openai", "httpx", "aiohttp", "streamlit", "subprocess", "socket")


@dataclass(frozen=True)
class Layering:
    """What the checker holds a package to (the real one: :data:`LAYERS` and the rules above)."""

    package: str
    layers: Mapping[str, int]
    face_may_also_import: tuple[str, ...] = FACE_MAY_ALSO_IMPORT
    only_imported_by: Mapping[str, tuple[str, ...]] | None = None
    not_in_the_pure_core: tuple[str, ...] = NOT_IN_THE_PURE_CORE

    def layer_of(self, module: str) -> int | None:
        best: tuple[int, int] | None = None  # (length of the matching name, its layer)
        for name, layer in self.layers.items():
            if within(module, name) and (best is None or len(name) > best[0]):
                best = (len(name), layer)
        return None if best is None else best[1]


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str  # a module of the package, or a top-level name outside it ("duckdb", "os")
    line: int


def within(module: str, name: str) -> bool:
    """``module`` is ``name`` or inside it (``mcqaudit.store.db`` is within ``mcqaudit.store``)."""
    return module == name or module.startswith(name + ".")


# --- reading the graph -----------------------------------------------------------------------------------
def modules_of(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package under ``root`` (the package's folder) by its dotted name."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join([package, *parts])] = path
    return out


def _package_of(module: str, path: Path) -> str:
    """The package a module's relative imports start from."""
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = _package_of(module, path).split(".")
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _targets(node: ast.Import | ast.ImportFrom, module: str, path: Path, known: set[str]) -> Iterator[str]:
    """The modules one import statement loads (``from pkg import mod`` loads ``pkg.mod`` when it is one)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
        return
    source = _resolve(module, path, node)
    for alias in node.names:
        sub = f"{source}.{alias.name}"
        yield sub if sub in known else source


def imports_of(modules: Mapping[str, Path], package: str) -> list[Import]:
    """Every import in every module (at any depth: inside functions, under TYPE_CHECKING), each named by
    the package module it loads, or by the top-level name of a module outside the package."""
    known = set(modules)
    out: dict[Import, None] = {}  # in the order met, once each (`from m import a, b` is one import of m)
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(node, module, path, known):
                if within(target, package):
                    while target not in known and "." in target:  # `import pkg.mod.Name` style leftovers
                        target = target.rpartition(".")[0]
                    out[Import(module, target, node.lineno)] = None
                elif target:
                    out[Import(module, target.split(".")[0], node.lineno)] = None
    return sorted(out, key=lambda i: (i.importer, i.line, i.imported))


# --- the rules -------------------------------------------------------------------------------------------
def _layer_rule(rules: Layering, imp: Import) -> str | None:
    mine, theirs = rules.layer_of(imp.importer), rules.layer_of(imp.imported)
    if mine is None or theirs is None or imp.importer == imp.imported:
        return None
    where = f"{imp.importer} imports {imp.imported} (line {imp.line})"
    allowed = any(within(imp.imported, name) for name in rules.face_may_also_import)
    if mine == FACE and theirs not in (FACE, USE_CASE, PURE) and not allowed:
        return f"{where}: a face may import only app/ and the pure core, not {LAYER_NAMES[theirs]}"
    if theirs < mine:
        return f"{where}: {LAYER_NAMES[mine]} may not import {LAYER_NAMES[theirs]}, a layer above it"
    return None


def _outside_rules(rules: Layering, imp: Import) -> Iterator[str]:
    where = f"{imp.importer} imports {imp.imported} (line {imp.line})"
    for name, owners in (rules.only_imported_by or {}).items():
        if imp.imported == name and not any(within(imp.importer, o) for o in owners):
            yield f"{where}: only {', '.join(o + '.*' for o in owners)} may import {name}"
    if rules.layer_of(imp.importer) == PURE and imp.imported in rules.not_in_the_pure_core:
        yield f"{where}: the pure core imports none of {', '.join(rules.not_in_the_pure_core)}"


def cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """One import cycle (``[a, b, ..., a]``) for every group of modules that import each other in a circle
    (the strongly connected components of the graph with more than one module, or a module that imports
    itself), each starting from its first module in name order."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    out = []
    for group in _components(graph):
        start = min(group)
        if len(group) == 1 and start not in graph[start]:
            continue
        out.append(_cycle_through(start, graph, group))
    return sorted(out)


def _components(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    groups.append(group)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return groups


def _cycle_through(start: str, graph: Mapping[str, set[str]], group: set[str]) -> list[str]:
    """The shortest path from ``start`` back to itself inside its component (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & group):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if child not in came_from:
                    came_from[child] = node
                    nxt.append(child)
        frontier = nxt
    raise AssertionError(f"{start} is in a component without a cycle")  # pragma: no cover


def violations(root: Path, rules: Layering) -> list[str]:
    """Every breach of the layering in the package under ``root``, one sentence each."""
    modules = modules_of(root, rules.package)
    found = [
        f"{m} is in no layer: add it to LAYERS in tests/test_layers.py" for m in modules if rules.layer_of(m) is None
    ]
    imports = imports_of(modules, rules.package)
    for imp in imports:
        if imp.imported in modules:
            rule = _layer_rule(rules, imp)
            if rule:
                found.append(rule)
        else:
            found.extend(_outside_rules(rules, imp))
    inside = {(i.importer, i.imported) for i in imports if i.imported in modules and i.importer != i.imported}
    found += ["import cycle: " + " -> ".join(c) for c in cycles(inside)]
    return found


def format_violations(found: Sequence[str]) -> str:
    return f"{len(found)} breaches of the layering (DESIGN §9, tests/test_layers.py):\n  " + "\n  ".join(found)


# --- the package -----------------------------------------------------------------------------------------
REAL = Layering("mcqaudit", LAYERS, only_imported_by=ONLY_IMPORTED_BY)


def test_the_package_holds_its_layering() -> None:
    found = violations(PACKAGE_ROOT, REAL)
    if found:
        pytest.fail(format_violations(found), pytrace=False)


def test_every_layer_names_modules_that_exist() -> None:
    """A name in LAYERS that matches no module is a typo or a module that moved: the table would hold
    nothing for it."""
    modules = modules_of(PACKAGE_ROOT, "mcqaudit")
    stale = [name for name in LAYERS if not any(within(m, name) for m in modules)]
    assert stale == [], stale


# --- the checker itself, on a synthetic package -------------------------------------------------------------
def _package(tmp_path: Path, files: Mapping[str, str]) -> Path:
    root = tmp_path / "toy"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        init = path.parent / "__init__.py"
        if not init.exists():
            init.write_text("", encoding="utf-8")
    return root


TOY = Layering(
    "toy",
    {"toy": PURE, "toy.cli": FACE, "toy.app": USE_CASE, "toy.svc": SERVICE, "toy.store": ADAPTER, "toy.core": PURE},
    only_imported_by={"duckdb": ("toy.store",)},
)


def test_the_checker_passes_a_package_that_holds_the_layering(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "cli.py": "from toy.app import run\nfrom toy import core\n",
            "app/__init__.py": "from .run import run\n",
            "app/run.py": "from ..svc import work\nfrom toy.store.db import open_it\n\ndef run(): ...\n",
            "svc.py": "from toy.store import db\nimport json\n",
            "store/db.py": "import duckdb\nfrom ..core import rule\n\ndef open_it(): ...\n",
            "core.py": "import math\n",
        },
    )
    assert violations(root, TOY) == []


def test_the_checker_finds_each_kind_of_breach(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "cli.py": "def f():\n    from toy.store.db import open_it\n",  # a face reaching the store, in a function
            "app.py": "",
            "svc.py": "from . import app\n",  # a service importing a use case: upward
            "store/db.py": "from . import journal\n",
            "store/journal.py": "from .judging import x\n",
            "store/judging.py": "from toy.store import db\nx = 1\n",  # db -> journal -> judging -> db
            "core.py": "import subprocess\nimport duckdb\n",  # the pure core doing I/O
            "extra.py": "",  # in the toy package's root layer: pure
            "odd/mod.py": "",  # "toy.odd" falls under "toy" too; a layer table without "toy" would miss it
        },
    )
    found = violations(root, TOY)
    assert found == [
        "toy.cli imports toy.store.db (line 2): a face may import only app/ and the pure core, not an adapter (layer 4)",
        "toy.core imports subprocess (line 1): the pure core imports none of "
        + ", ".join(NOT_IN_THE_PURE_CORE),
        "toy.core imports duckdb (line 2): only toy.store.* may import duckdb",
        "toy.core imports duckdb (line 2): the pure core imports none of " + ", ".join(NOT_IN_THE_PURE_CORE),
        "toy.svc imports toy.app (line 1): a service (layer 3) may not import a use case (layer 2), a layer above it",
        "import cycle: toy.store.db -> toy.store.journal -> toy.store.judging -> toy.store.db",
    ], format_violations(found)


def test_the_checker_names_a_module_in_no_layer(tmp_path: Path) -> None:
    root = _package(tmp_path, {"core.py": "", "newthing.py": ""})
    rules = Layering("toy", {"toy.core": PURE, "toy.__init__": PURE})
    found = violations(root, rules)
    assert "toy is in no layer: add it to LAYERS in tests/test_layers.py" in found
    assert "toy.newthing is in no layer: add it to LAYERS in tests/test_layers.py" in found


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ([("a", "b"), ("b", "c")], []),
        ([("a", "b"), ("b", "a")], [["a", "b", "a"]]),
        ([("b", "c"), ("c", "d"), ("d", "b"), ("a", "b")], [["b", "c", "d", "b"]]),
        ([("a", "a")], [["a", "a"]]),
        ([("a", "b"), ("b", "a"), ("c", "d"), ("d", "c")], [["a", "b", "a"], ["c", "d", "c"]]),
    ],
)
def test_cycles(edges: list[tuple[str, str]], expected: list[list[str]]) -> None:
    assert cycles(edges) == expected


def test_relative_imports_resolve_from_the_package(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "store/__init__.py": "from .db import Study\nfrom . import rows\n",
            "store/db.py": "from ..core import rule\nfrom .. import core\n",
            "store/rows.py": "import toy.core\n",
            "core.py": "",
        },
    )
    got = {(i.importer, i.imported) for i in imports_of(modules_of(root, "toy"), "toy")}
    assert got == {
        ("toy.store", "toy.store.db"),
        ("toy.store", "toy.store.rows"),
        ("toy.store.db", "toy.core"),
        ("toy.store.rows", "toy.core"),
    }


def test_no_test_module_imports_another_or_conftest() -> None:
    """Shared helpers live in helper modules (tests/helpers.py, tests/builders.py, ...), fixtures in
    conftest.py; a test module imported by another runs its tests' module-level code twice and ties them."""
    tests = Path(__file__).resolve().parent
    modules = {m: p for m, p in modules_of(tests, "tests").items() if p.parent == tests}
    found = [
        f"{i.importer} imports {i.imported} (line {i.line})"
        for i in imports_of(modules, "tests")
        if i.imported.startswith(("tests.test_", "tests.conftest"))
    ]
    assert not found, found


MAX_FUNCTION_LINES = 100


def long_functions(root: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """Every function or method under ``root`` whose body (docstring included) is longer than ``limit`` lines."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.body[0].lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name}: {lines} lines")
    return found


def test_no_function_body_is_over_100_lines() -> None:
    """A function a reader cannot hold in view is where a rule hides (issue 19: `report.sections` was 317
    lines, `import_review_log` 221, `grade_batch_async` 219): split it into named steps."""
    assert not long_functions(PACKAGE_ROOT), long_functions(PACKAGE_ROOT)


def test_the_length_check_finds_a_long_function(tmp_path: Path) -> None:
    root = _package(tmp_path, {"big.py": "def f():\n" + "    x = 1\n" * 101, "small.py": "def g():\n    pass\n"})
    assert long_functions(root) == ["toy/big.py:1 f: 101 lines"]
