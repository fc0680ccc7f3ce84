"""The documents say what the code is: every module of the package is on the map of
docs/architecture.md, and the map names nothing that is gone.

Each failure says the one line to add or remove, so whoever adds a module fixes the
document in the same commit."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "outlast"
DOC = "docs/architecture.md"
ARCHITECTURE = ROOT / DOC
TREE_HEADING = "## The tree"
PHRASE_COLUMN = 25  # where a module's phrase starts on the map


@dataclass(frozen=True)
class Entry:
    """One line of the map: a module or folder, as a path under src/outlast/."""

    path: str  # "agents/openai/wire.py", "store/sql/"
    line: int  # 1-based, in docs/architecture.md


def tree_block(text: str) -> list[tuple[int, str]]:
    """The lines of the code block under ``## The tree``, numbered as in the file."""
    lines = text.splitlines()
    start = lines.index(TREE_HEADING)
    fence = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    end = next(i for i in range(fence + 1, len(lines)) if lines[i].startswith("```"))
    return [(i + 1, lines[i]) for i in range(fence + 1, end)]


ENTRY = re.compile(r"^(?P<indent> *)(?P<name>[\w.]+(?:\.py|/))(?: {2,}\S.*)?$")


def parse_map(text: str) -> list[Entry]:
    """The map's entries: a name ending in ``.py`` or ``/``, indented two spaces per
    folder level; deeper-indented lines continue the phrase above them."""
    block = tree_block(text)
    assert block and block[0][1].strip() == "src/outlast/", \
        f"{DOC}: the tree must start with the line 'src/outlast/'"
    folders: list[str] = []
    entries: list[Entry] = []
    for number, line in block[1:]:
        m = ENTRY.match(line)
        if m is None or len(m["indent"]) % 2:
            continue
        level = len(m["indent"]) // 2
        if not 1 <= level <= len(folders) + 1:
            continue  # a phrase's continuation
        del folders[level - 1:]
        name = m["name"]
        entries.append(Entry("".join(f + "/" for f in folders) + name, number))
        if name.endswith("/"):
            folders.append(name[:-1])
    return entries


def suggested_line(path: str) -> str:
    """The map's line for ``path``, indented for its folder, the phrase left to write."""
    parts = path.rstrip("/").split("/")
    name = parts[-1] + ("/" if path.endswith("/") else "")
    head = "  " * len(parts) + name
    return head + " " * max(2, PHRASE_COLUMN - len(head)) + "<what it holds, in one phrase>"


def modules() -> set[str]:
    return {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
            if "__pycache__" not in p.parts}


def map_problems(text: str, present: set[str]) -> list[str]:
    """What to change on the map so that it names exactly the modules ``present``."""
    entries = parse_map(text)
    named = {e.path for e in entries}
    problems: list[str] = []
    def add(path: str) -> None:
        where = "src/outlast/" + path.rstrip("/").rpartition("/")[0]
        message = (f"src/outlast/{path} is not on the map: in {DOC}, "
                   f"'{TREE_HEADING}', add under {where.rstrip('/')}/ the line\n"
                   f"{suggested_line(path)}")
        if message not in problems:
            problems.append(message)

    for module in sorted(present):
        parts = module.split("/")
        for depth in range(1, len(parts)):  # its folders first (a folder's line is
            folder = "/".join(parts[:depth]) + "/"  # its __init__.py's)
            if folder not in named:
                add(folder)
        if parts[-1] != "__init__.py" and module not in named:
            add(module)
    existing = present | {m.rpartition("/")[0] + "/" for m in present}
    for entry in entries:
        on_disk = (PACKAGE / entry.path).exists()
        if entry.path not in existing and not on_disk:
            problems.append(f"{DOC} line {entry.line} names "
                            f"src/outlast/{entry.path}, which does not exist: remove the line")
    return problems


def test_every_module_is_on_the_map_and_nothing_gone_is() -> None:
    problems = map_problems(ARCHITECTURE.read_text(), modules())
    assert not problems, "\n".join(problems)


MINI = """intro

## The tree

```
src/outlast/
  errors.py              domain errors
  store/                 stores
    base.py              the interface,
                         continued.py here is a phrase, not an entry
  gone.py                removed long ago
```
"""


def test_the_map_check_names_the_line_to_add_or_remove() -> None:
    present = {"errors.py", "store/__init__.py", "store/base.py", "store/new.py",
               "kinds/__init__.py", "kinds/a.py"}
    problems = map_problems(MINI, present)
    assert problems == [
        "src/outlast/kinds/ is not on the map: in docs/architecture.md, '## The tree',"
        " add under src/outlast/ the line\n"
        "  kinds/                 <what it holds, in one phrase>",
        "src/outlast/kinds/a.py is not on the map: in docs/architecture.md, '## The tree',"
        " add under src/outlast/kinds/ the line\n"
        "    a.py                 <what it holds, in one phrase>",
        "src/outlast/store/new.py is not on the map: in docs/architecture.md, '## The tree',"
        " add under src/outlast/store/ the line\n"
        "    new.py               <what it holds, in one phrase>",
        "docs/architecture.md line 11 names src/outlast/gone.py, which does not exist: "
        "remove the line",
    ]
    assert [e.path for e in parse_map(MINI)] == ["errors.py", "store/", "store/base.py",
                                                "gone.py"]
