"""The shape of rlcfg's import graph: no cycle between modules, none between the folders (and top-level modules) of
`rlcfg/`, so no import runs back up a level, and a runtime that imports nothing that knows a dialect.

Every import counts, the ones deferred into a function included: a deferred import still ties the two modules
together, it only hides the cycle from the interpreter."""

from __future__ import annotations

import ast
import functools
from collections import defaultdict

import pytest

from tests.helpers import ROOT

PACKAGE = ROOT / "rlcfg"
# What knows a dialect: its schema, rules, lowering, emitter and the front end that detects it.
DIALECT_AWARE = ("rlcfg.schema", "rlcfg.lower", "rlcfg.convert", "rlcfg.dialects", "rlcfg.source", "rlcfg.frontend",
                 "rlcfg.cli", "rlcfg.fix", "rlcfg.preflight", "rlcfg.smoke_settings")


@functools.cache
def modules() -> dict[str, object]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _owner(name: str) -> str | None:
    """The module of rlcfg that an imported name lives in."""
    mods = modules()
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


@functools.cache
def graph() -> dict[str, frozenset[str]]:
    """module -> the modules of rlcfg it imports. `from package import submodule` is an edge to the submodule
    only: the package's __init__ runs first, but the importer does not depend on it."""
    mods = modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for target in targets:
                owner = _owner(target) if target.startswith("rlcfg") else None
                if owner and owner != name:
                    edges[name].add(owner)
    return {name: frozenset(edges[name]) for name in mods}


def cycles(edges: dict[str, frozenset[str]]) -> list[set[str]]:
    """The strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def level(module: str) -> str:
    """A folder of rlcfg/ (rlcfg.schema) or a top-level module (rlcfg.ir)."""
    return ".".join(module.split(".")[:2])


def test_modules_import_each_other_in_no_cycle():
    found = [sorted(c) for c in cycles(graph())]
    assert not found, f"import cycles: {found}"


def test_no_import_runs_back_up_a_level():
    folders: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph().items():
        folders[level(module)] |= {level(t) for t in targets if level(t) != level(module)}
    found = cycles({k: frozenset(v) for k, v in folders.items()})
    culprits = [sorted(f"{m} -> {t}" for m, ts in graph().items() for t in ts
                       if level(m) in c and level(t) in c and level(m) != level(t)) for c in found]
    assert not found, f"folders that import each other: {culprits}"


def test_the_runtime_knows_no_dialect():
    wrong = sorted(f"{module} -> {target}" for module, targets in graph().items() if module.startswith("rlcfg.runtime")
                   for target in targets if target.startswith(DIALECT_AWARE))
    assert not wrong, wrong


def _dialect_packages() -> list[str]:
    return sorted(m for m in modules() if m.count(".") == 2 and m.startswith("rlcfg.dialects."))


# A dialect package's floors: its grammars, resolvers and inventories; `models` (and `models_<pipeline>`); `derived`;
# `rules`, `lower` and `emit` side by side, which never import each other; the package's __init__ that binds them.
FLOORS = {"models": 1, "derived": 2, "rules": 3, "lower": 3, "emit": 3}
SIDE_BY_SIDE = 3


@pytest.mark.parametrize("package", _dialect_packages())
def test_a_dialect_package_imports_only_down_its_floors(package):
    def floor(module: str) -> int:
        if module == package:
            return SIDE_BY_SIDE + 1
        return FLOORS.get(module[len(package) + 1:].split(".")[0].split("_")[0], 0)

    def wrong(m: str, t: str) -> bool:
        return floor(t) > floor(m) or (floor(t) == floor(m) == SIDE_BY_SIDE) or t == package

    found = sorted(f"{m} -> {t}" for m, targets in graph().items() if m.startswith(package + ".")
                   for t in targets if (t == package or t.startswith(package + ".")) and wrong(m, t))
    assert not found, found


@pytest.mark.parametrize("package", _dialect_packages())
def test_a_dialect_imports_no_other_dialect(package):
    wrong = sorted(f"{m} -> {t}" for m, targets in graph().items() if m == package or m.startswith(package + ".")
                   for t in targets if t.startswith("rlcfg.dialects.") and not (t == package or
                                                                               t.startswith(package + ".")))
    assert not wrong, wrong


@pytest.mark.parametrize("edges,expected", [
    ({"a": frozenset({"b"}), "b": frozenset({"a"})}, [{"a", "b"}]),
    ({"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset()}, []),
])
def test_cycles_are_found(edges, expected):
    assert cycles(edges) == expected


def test_deferred_imports_count():
    # rlcfg.cli.__init__ imports the command modules only inside main(); that is still an edge.
    assert "rlcfg.cli.commands" in graph()["rlcfg.cli"]


def test_every_folder_of_the_package_is_shipped():
    # pyproject's packages.find ships only folders with an __init__.py; a folder without one imports fine from the
    # source tree and is missing from the wheel.
    folders = {folder for path in PACKAGE.rglob("*.py") if "__pycache__" not in path.parts
               for folder in (path.parent, *path.parent.parents) if folder.is_relative_to(PACKAGE)}
    assert sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists()) == []
