"""The package stays in pieces a reader can hold: every module of src/outlast/ at most
MODULE_LINES lines, every function or method at most FUNCTION_LINES (its def line
through its last line, docstring included), and no measurement in a docstring or a
comment (a figure like "12 ms" or "3x" there goes stale the day the code changes; the
measurements live in docs/performance.md, the code says why it is the way it is).

No allow-list: a module or function past its bound is split by concept, into named
steps, in the commit that grows it."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "outlast"
MODULE_LINES = 500
FUNCTION_LINES = 60

# A number followed by a unit of time or a ratio: "12.1 µs", "40 ms", "3.4x", and the
# same with a multiplication sign (U+00D7) for the x.
MEASUREMENT = re.compile(r"\d(?:[\d,.]*\d)?\s*(?:µs|us|ms|x|\u00d7|[KMG]B)(?!\w)")


def sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT).as_posix()}:{line}"


def module_problems(path: Path, text: str) -> list[str]:
    lines = len(text.splitlines())
    if lines <= MODULE_LINES:
        return []
    return [f"{where(path, 1)}: the module is {lines} lines (at most {MODULE_LINES}): "
            "split it by concept into modules of its folder"]


def function_problems(path: Path, tree: ast.Module) -> list[str]:
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > FUNCTION_LINES:
                problems.append(f"{where(path, node.lineno)}: {node.name} is {length} lines "
                                f"(at most {FUNCTION_LINES}): split it into named steps")
    return problems


def prose(text: str, tree: ast.Module) -> list[tuple[int, str]]:
    """The comments and docstrings of a module, line by line, numbered as in the file.
    A docstring is any string standing alone as a statement: a module's, a class's or
    a function's first, or one under an assignment that documents it."""
    found = [(tok.start[0], tok.string) for tok in
             tokenize.generate_tokens(io.StringIO(text).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            found += [(node.lineno + i, line)
                      for i, line in enumerate(node.value.value.splitlines())]
    return sorted(found)


def measurement_problems(path: Path, text: str, tree: ast.Module) -> list[str]:
    return [f"{where(path, line)}: {m.group(0)!r} is a measurement in a comment or "
            "docstring: move it to docs/performance.md and keep here why the code is so"
            for line, words in prose(text, tree) for m in MEASUREMENT.finditer(words)]


def shape_problems(path: Path, text: str) -> list[str]:
    tree = ast.parse(text, str(path))
    return (module_problems(path, text) + function_problems(path, tree)
            + measurement_problems(path, text, tree))


def test_every_module_and_function_is_short_and_no_docstring_carries_a_measurement() -> None:
    problems = [p for path in sources() for p in shape_problems(path, path.read_text())]
    assert not problems, "\n".join(problems)


SAMPLE = '''"""A batch of 32 took 15 ms; 1.5x faster than before, in 40 KB."""
TIMEOUT_MS = 40  # seconds, not a figure: 40 is code
DELAY = 0.2  # about 2\u00d7


def short() -> str:
    """Within 1 s, after max(1 s, TTL/4): seconds are no measurement."""
    return f"{TIMEOUT_MS:032x} 3 ms"


def long() -> None:
''' + "    pass\n" * FUNCTION_LINES


def test_the_shape_check_names_file_line_and_length() -> None:
    path = PACKAGE / "sample.py"
    assert shape_problems(path, SAMPLE) == [
        f"src/outlast/sample.py:11: long is {FUNCTION_LINES + 1} lines (at most "
        f"{FUNCTION_LINES}): split it into named steps",
        "src/outlast/sample.py:1: '15 ms' is a measurement in a comment or docstring: "
        "move it to docs/performance.md and keep here why the code is so",
        "src/outlast/sample.py:1: '1.5x' is a measurement in a comment or docstring: "
        "move it to docs/performance.md and keep here why the code is so",
        "src/outlast/sample.py:1: '40 KB' is a measurement in a comment or docstring: "
        "move it to docs/performance.md and keep here why the code is so",
        "src/outlast/sample.py:3: '2\u00d7' is a measurement in a comment or docstring: "
        "move it to docs/performance.md and keep here why the code is so",
    ]
    long_module = "x = 1\n" * (MODULE_LINES + 1)
    assert shape_problems(path, long_module) == [
        f"src/outlast/sample.py:1: the module is {MODULE_LINES + 1} lines (at most "
        f"{MODULE_LINES}): split it by concept into modules of its folder"]
