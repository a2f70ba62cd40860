"""The package's rooms import downwards only, and no two modules import each other.

Read as the installed package: ``hpcguard.models`` at the bottom (pure computation: it
imports nothing else of the package), then ``hpcguard.connectors``, then
``hpcguard.simulators`` and ``hpcguard.streams`` (one floor: either may use the other,
never both ways), then ``hpcguard.cli``.  ``hpcguard`` itself (version, settings) is the
ground every room above the models stands on.  Every import counts, also one inside a
function or under ``TYPE_CHECKING``: a lazy import is still an arrow.
"""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FLOORS = {"hpcguard.models": 0, "hpcguard": 0, "hpcguard.connectors": 1, "hpcguard.simulators": 2,
          "hpcguard.streams": 2, "hpcguard.cli": 3}
TOP = {"hpcguard.__main__": 3}   # runs the command line


def _modules() -> dict[str, Path]:
    """Module name → file, from the package directories pyproject.toml installs."""
    dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    out = {}
    for package, folder in dirs.items():
        for f in sorted((ROOT / folder).rglob("*.py")):
            parts = [p for p in f.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            if "__pycache__" not in f.parts:
                out[".".join([package, *parts])] = f
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The package's modules ``name`` imports anywhere in its file."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:   # relative: from the module's own package up
                here = name.split(".")[: len(name.split(".")) - node.level + is_package]
                base = ".".join(here + ([node.module] if node.module else []))
            # `from package import module` names the module; `from module import name` the module
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names)
    resolved = set()
    for target in found:
        while target and target not in MODULES:
            target = target.rpartition(".")[0]
        if target and target != name:
            resolved.add(target)
    return resolved


def _floor(name: str) -> int:
    if name in TOP:
        return TOP[name]
    room = max((r for r in FLOORS if name == r or name.startswith(r + ".")), key=len)
    return FLOORS[room]


EDGES = {name: _imports(name, path) for name, path in MODULES.items()}


def test_the_modules_are_found():
    # an empty walk would pass vacuously
    assert len(MODULES) > 100 and "hpcguard.cli.failure" in MODULES and "hpcguard.models.failure.ensemble" in MODULES
    assert "hpcguard.streams.metrics" in EDGES["hpcguard.streams.app"]


def test_no_import_runs_up_a_floor():
    up = sorted(f"{a} -> {b}" for a, targets in EDGES.items() for b in targets if _floor(b) > _floor(a))
    assert not up, "imports from a higher floor:\n" + "\n".join(up)


def test_the_models_import_only_the_models():
    # pure computation: no settings, no connectors, usable from a notebook and testable without a broker
    out = sorted(f"{a} -> {b}" for a, targets in EDGES.items() if a.startswith("hpcguard.models")
                 for b in targets if not b.startswith("hpcguard.models"))
    assert not out, "\n".join(out)


def _cycles() -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted."""
    index, low, stack, on, groups, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(EDGES[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(EDGES):
        if v not in index:
            visit(v)
    return sorted(groups)


def test_no_import_loops():
    loops = _cycles()
    assert not loops, "modules that import each other (directly or round a loop):\n" + "\n".join(
        " <-> ".join(group) for group in loops)


@pytest.mark.parametrize("source, target", [("hpcguard.cli.demo", "hpcguard.cli.online"),
                                            ("hpcguard.connectors.adapters", "hpcguard.connectors.slurm"),
                                            ("hpcguard.simulators.telemetry", "hpcguard.simulators.writers"),
                                            ("hpcguard.streams.agents_jobs", "hpcguard.streams.app")])
def test_the_loops_issue_60_named_stay_open(source, target):
    assert not (target in EDGES[source] and source in EDGES[target])
