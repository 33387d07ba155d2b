"""The package layering: no two packages of rackwise import each other, even inside a function.

Every ``import rackwise.x...`` and ``from rackwise.x... import`` is an edge
from the importing module's top-level package to ``x`` (module-level,
function-local and ``TYPE_CHECKING`` imports alike), and the graph of
those edges must have no cycle. The declared order below is the README's
layout table; a package may import only packages earlier in it.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1] / "src" / "rackwise"

# Lowest first. Single modules (errors.py, run.py) count as packages.
LAYERS: list[set[str]] = [
    {"errors", "frozen", "sorted_ints"},
    {"workload", "cluster", "metrics", "report"},
    {"traces"},
    {"perf"},
    {"engine"},
    {"policies", "sim"},
    {"rl", "run", "backends"},
    {"experiments", "forecast", "testing"},
    {"cli"},
]


def _package_of(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    return parts[0].removesuffix(".py")


def import_graph() -> dict[str, dict[str, set[str]]]:
    """Package -> imported package -> the files that import it."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        source = _package_of(path)
        if source == "__init__" or source == "__main__":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] == "rackwise" and len(parts) > 1 and parts[1] != source:
                    graph.setdefault(source, {}).setdefault(parts[1], set()).add(
                        str(path.relative_to(ROOT)))
    return graph


def find_cycle(graph: dict[str, dict[str, set[str]]]) -> list[str] | None:
    """One cycle of packages, as a path that ends where it starts, or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph.get(node, {})):
            if state.get(target) == "open":
                return [*stack[stack.index(target):], target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def test_no_two_packages_import_each_other() -> None:
    graph = import_graph()
    cycle = find_cycle(graph)
    if cycle is not None:
        hops = [f"{a} -> {b} ({', '.join(sorted(graph[a][b]))})" for a, b in itertools.pairwise(cycle)]
        pytest.fail("package cycle: " + "; ".join(hops))


def test_each_package_imports_only_lower_layers() -> None:
    rank = {package: level for level, layer in enumerate(LAYERS) for package in layer}
    graph = import_graph()
    missing = (set(graph) | {t for targets in graph.values() for t in targets}) - set(rank)
    assert not missing, f"packages missing from LAYERS: {sorted(missing)}"
    upward = [f"{source} -> {target} ({', '.join(sorted(files))})"
              for source, targets in sorted(graph.items())
              for target, files in sorted(targets.items()) if rank[target] > rank[source]]
    assert not upward, upward


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function() -> None:
    graph = {"a": {"b": {"a/x.py"}}, "b": {"c": {"b/y.py"}}, "c": {"a": {"c/z.py"}}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": {"a/x.py"}}}) is None
