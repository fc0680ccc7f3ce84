"""The layer rules of docs/architecture.md, checked on the source: dependencies point
inward, the agent SDK and the protocol know nothing of the engine, and no module imports
itself through a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# Layer -> the packages it must never import (directly or by a TYPE_CHECKING import).
FORBIDDEN = {
    "outlast.protocol": ("outlast.agent", "outlast.agents", "outlast.engine", "outlast.store",
                         "outlast.http", "outlast.cli", "outlast.client"),
    "outlast.agent": ("outlast.agents", "outlast.engine", "outlast.store", "outlast.http",
                      "outlast.cli", "outlast.client"),
    "outlast.store": ("outlast.agent", "outlast.agents", "outlast.engine", "outlast.http",
                      "outlast.cli", "outlast.client"),
    "outlast.engine": ("outlast.http", "outlast.cli", "outlast.client"),
    "outlast.agents": ("outlast.engine", "outlast.store", "outlast.http", "outlast.cli"),
    "outlast.http": ("outlast.cli",),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every outlast module ``path`` imports, at any level of the file."""
    tree = ast.parse(path.read_text(), str(path))
    package = module_name(path) if path.name == "__init__.py" else \
        module_name(path).rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m == "outlast" or m.startswith("outlast.")}


MODULES = {module_name(p): p for p in SRC.joinpath("outlast").rglob("*.py")}
GRAPH = {name: {m for m in imports_of(path) if m in MODULES and m != name}
         for name, path in MODULES.items()}


def in_layer(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_outside_its_rules(layer: str) -> None:
    broken = sorted(
        f"{name} imports {dep}"
        for name, deps in GRAPH.items() if in_layer(name, layer)
        for dep in deps
        if any(in_layer(dep, banned) for banned in FORBIDDEN[layer]))
    assert not broken, "\n".join(broken)


def test_no_module_imports_itself_through_a_circle() -> None:
    # Package __init__ re-exports point at their own children; a circle through them is
    # no circle of behaviour, so edges into a package's own subtree are left out.
    def edges(name: str) -> set[str]:
        return {d for d in GRAPH[name] if not in_layer(d, name)}

    circles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(name: str) -> None:
        state[name] = 1
        stack.append(name)
        for dep in sorted(edges(name)):
            if state.get(dep) == 1:
                circles.append([*stack[stack.index(dep):], dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[name] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name)
    assert not circles, "\n".join(" -> ".join(c) for c in circles)


def test_the_checks_see_the_code() -> None:
    assert "outlast.engine.runtime" in GRAPH and "outlast.agent" in GRAPH
    assert "outlast.agent" in GRAPH["outlast.engine.execution"]
