"""The layer rules of docs/architecture.md, checked on the source: dependencies point
inward, the agent SDK and the protocol know nothing of the engine, and no module imports
itself through a circle.

The rules are the document's own table (**Layer rules**): each part of the package (a
top-level module or package of ``outlast``) may import itself and the parts its row
names, and nothing else of outlast."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
DOC = "docs/architecture.md"
ANYTHING = None  # a row that says "anything"


def layer_table(text: str) -> dict[str, frozenset[str] | None]:
    """Each part named in the table after "**Layer rules**", with what it may import
    (None: anything). Names in parentheses are comments."""
    lines = text[text.index("**Layer rules**"):].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rules: dict[str, frozenset[str] | None] = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        parts_cell, allowed_cell = (re.sub(r"\([^)]*\)", "", c)
                                    for c in line.strip("|").split("|")[:2])
        allowed = ANYTHING if allowed_cell.strip() == "anything" else \
            frozenset(re.findall(r"`([\w.]+)`", allowed_cell))
        for part in re.findall(r"`([\w.]+)`", parts_cell):
            rules[part] = allowed
    return rules


RULES = layer_table((ROOT / DOC).read_text())


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


def part_of(module: str) -> str:
    """The table's name for the part ``module`` belongs to: ``http`` for
    ``outlast.http.app``, ``errors`` for ``outlast.errors``, ``outlast`` for the root."""
    return module.split(".")[1] if "." in module else module


PARTS = sorted({part_of(name) for name in MODULES})


def test_every_part_of_the_package_has_a_row_and_every_row_a_part() -> None:
    missing = [f"{DOC}, **Layer rules**: add a row for `{part}`: | `{part}` | <the parts "
               "it may import, or nothing> |" for part in PARTS if part not in RULES]
    gone = [f"{DOC}, **Layer rules**: `{part}` is no part of src/outlast/: remove it"
            for part in RULES if part not in PARTS]
    assert not missing + gone, "\n".join(missing + gone)


@pytest.mark.parametrize("part", PARTS)
def test_a_part_imports_only_what_its_row_allows(part: str) -> None:
    allowed = RULES.get(part, frozenset())
    if allowed is ANYTHING:
        return
    broken = sorted(
        f"{name} imports {dep}: {DOC}'s layer table lets `{part}` import "
        f"{', '.join(sorted(allowed)) or 'nothing of outlast'}; change the import, or, if "
        f"the dependency is right, add `{part_of(dep)}` to the row of `{part}`"
        for name, deps in GRAPH.items() if part_of(name) == part
        for dep in deps
        # The root package is every module's parent; importing it costs nothing.
        if dep != "outlast" and part_of(dep) != part and part_of(dep) not in allowed)
    assert not broken, "\n".join(broken)


def test_the_table_reads_as_written() -> None:
    assert RULES["protocol"] == frozenset({"errors"})
    assert RULES["cli"] is ANYTHING
    assert RULES["conformance"] == frozenset()
    assert RULES["logs"] == RULES["tracing"] == frozenset({"errors"})
    assert "open_store" not in (RULES["http"] or ())  # a comment, not a part


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
