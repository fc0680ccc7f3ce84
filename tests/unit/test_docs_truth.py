"""The documents say what the code is: every module of the package is on the map of
docs/architecture.md, and the map names nothing that is gone; the constants it names
exist; docs/spec.md names every route, query parameter, request header and error code of
the HTTP surface; the README's exceptions to the OUTLAST_<FLAG> rule are the settings'.

Each failure says the one line to add or remove, so whoever adds a module fixes the
document in the same commit."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi import FastAPI
from starlette.routing import Mount, Route

from outlast.config import Settings, options
from outlast.engine.runtime import Engine
from outlast.http.app import create_app
from outlast.http.errors import STATUS
from outlast.store import open_store

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


# -- docs/spec.md: the HTTP surface ---------------------------------------------------

SPEC = ROOT / "docs" / "spec.md"
HTTP = PACKAGE / "http"
# Calls whose first argument is an error code the HTTP layer sends.
ERROR_MAKERS = frozenset({"error_response", "error_body", "_raw_error"})


def literal_codes() -> set[str]:
    """Every error code spelled as a literal where the HTTP layer makes an error."""
    found: set[str] = set()
    for path in HTTP.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and node.args \
                    and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else \
                    node.func.id if isinstance(node.func, ast.Name) else ""
                if name in ERROR_MAKERS:
                    found.add(node.args[0].value)
    return found


def headers_read() -> set[str]:
    """Request headers the HTTP layer reads by name (``headers.get("...")``)."""
    found: set[str] = set()
    for path in HTTP.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "get" and node.args \
                    and isinstance(node.func.value, ast.Attribute) \
                    and node.func.value.attr == "headers" \
                    and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return found


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> FastAPI:
    data = tmp_path_factory.mktemp("data")
    engine = Engine(Settings(data_dir=data), open_store(None, data), {})
    return create_app(engine)


@dataclass(frozen=True)
class Operation:
    """A route as the spec's table names it, with what it reads and answers."""

    method: str
    path: str
    queries: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()  # successes other than 200


def operations(app: FastAPI) -> list[Operation]:
    """Every route the app serves: those of its OpenAPI document, with their parameters
    and answers, and those it leaves out of the document (itself, /docs, mounts)."""
    found: dict[tuple[str, str], Operation] = {}
    for path, ops in app.openapi()["paths"].items():
        for method, op in ops.items():
            params = op.get("parameters", [])
            found[method.upper(), path] = Operation(
                method.upper(), path,
                tuple(p["name"] for p in params if p["in"] == "query"),
                tuple(p["name"] for p in params if p["in"] == "header"),
                tuple(s for s in op.get("responses", {}) if s[0] == "2" and s != "200"))
    for route in app.routes:
        if isinstance(route, Mount):
            found["GET", route.path + "/…"] = Operation("GET", route.path + "/…")
        elif isinstance(route, Route) and (route.include_in_schema is False
                                           or route.path == app.openapi_url):
            for method in sorted((route.methods or set()) - {"HEAD"}):
                found.setdefault((method, route.path), Operation(method, route.path))
    return sorted(found.values(), key=lambda o: (o.path, o.method))


def table_rows(spec: str) -> list[str]:
    return [line for line in spec.splitlines() if line.startswith("| `")]


def spec_problems(spec: str, ops: list[Operation], codes: set[str],
                  headers: set[str]) -> list[str]:
    """What docs/spec.md lacks of the HTTP surface, each with where to add it."""
    problems: list[str] = []
    rows = table_rows(spec)
    for op in ops:
        name = f"`{op.method} {op.path}`"
        # A route has a row of its own; a mount's files are named on a route's row.
        mounted = op.path.endswith("/…")
        row = next((r for r in rows if name in (r if mounted else r.split("|")[1])), None)
        if row is None:
            problems.append(f"docs/spec.md §3: the table has no row for {name}; add one")
            continue
        for q in op.queries:
            if not re.search(rf"[?&]{re.escape(q)}\b", row):
                problems.append(f"docs/spec.md §3, the row of {name}: say what `?{q}=` does")
        for status in op.statuses:
            if not re.search(rf"\b{status}\b", row):
                problems.append(f"docs/spec.md §3, the row of {name}: say when it answers "
                                f"{status}")
    for code in sorted(codes):
        if f"`{code}`" not in spec:
            problems.append(f"docs/spec.md §3, 'Error codes (status)': add `{code}` and its "
                            "status")
    lowered = spec.lower()
    for header in sorted(headers, key=str.lower):
        if not re.search(rf"`{re.escape(header.lower())}[`:]", lowered):
            problems.append(f"docs/spec.md §3, 'Request options': add the header "
                            f"`{header}` and what it does")
    return problems


def test_the_spec_names_every_route_parameter_header_and_error_code(app: FastAPI) -> None:
    ops = operations(app)
    assert {("POST", "/agents/{agent}"), ("GET", "/docs"), ("GET", "/openapi.json")} <= \
        {(o.method, o.path) for o in ops}, "the check no longer sees the app's routes"
    codes = set(STATUS) | literal_codes() | {"http_error"}
    headers = {h for o in ops for h in o.headers} | headers_read()
    assert {"traceparent", "Idempotency-Key"} <= headers
    problems = spec_problems(SPEC.read_text(), ops, codes, headers)
    assert not problems, "\n".join(problems)


def test_the_spec_check_says_what_is_missing_where() -> None:
    spec = ("| `GET /threads` | list; `?limit=` a page |\n"
            "Error codes (status): `unauthorized` 401. Headers: `Idempotency-Key`.\n")
    ops = [Operation("GET", "/threads", ("limit", "cursor")),
           Operation("DELETE", "/threads/{thread_id}", statuses=("204",)),
           Operation("POST", "/admin/gc")]
    assert spec_problems(spec, ops, {"unauthorized", "forbidden"},
                         {"idempotency-key", "traceparent"}) == [
        "docs/spec.md §3, the row of `GET /threads`: say what `?cursor=` does",
        "docs/spec.md §3: the table has no row for `DELETE /threads/{thread_id}`; add one",
        "docs/spec.md §3: the table has no row for `POST /admin/gc`; add one",
        "docs/spec.md §3, 'Error codes (status)': add `forbidden` and its status",
        "docs/spec.md §3, 'Request options': add the header `traceparent` and what it does",
    ]


# -- README: the variables that break the OUTLAST_<FLAG> rule ---------------------------

README = ROOT / "README.md"
EXCEPTION = re.compile(r"`(--[\w-]+)`\s+\(`(OUTLAST_\w+)`\)")


def readme_exceptions(readme: str) -> dict[str, str]:
    """The flags the README names as exceptions to the rule, with their variables: the
    sentence that begins "Every flag also reads", up to its semicolon."""
    start = readme.index("Every flag also reads")
    sentence = readme[start:readme.index(";", start)]
    return dict(EXCEPTION.findall(sentence))


def test_the_readme_names_exactly_the_flags_whose_variable_breaks_the_rule() -> None:
    breaking = {o.flag: o.env for o in options()
                if o.env != "OUTLAST_" + o.flag.removeprefix("--").upper().replace("-", "_")}
    assert breaking, "every flag follows the rule: say so in the README, drop this test"
    assert readme_exceptions(README.read_text()) == breaking, (
        "README.md, 'Every flag also reads an OUTLAST_* variable': list exactly "
        + ", ".join(f"`{flag}` (`{env}`)" for flag, env in breaking.items()))


# -- constants the documents name -----------------------------------------------------

CONSTANT = re.compile(r"`(\w+)\.([A-Z][A-Z0-9_]+)`")


def defined_constants() -> set[tuple[str, str]]:
    """(module, NAME) for every module-level constant of the package, and (Class, NAME)
    for every constant a class declares."""
    found: set[tuple[str, str]] = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        scopes: list[tuple[str, list[ast.stmt]]] = [(path.stem, tree.body)]
        scopes += [(n.name, n.body) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
        for owner, body in scopes:
            for node in body:
                targets = node.targets if isinstance(node, ast.Assign) else \
                    [node.target] if isinstance(node, ast.AnnAssign) else []
                found.update((owner, t.id) for t in targets if isinstance(t, ast.Name))
    return found


DOCUMENTS = sorted([*(ROOT / "docs").glob("*.md"), README])


def test_every_constant_the_documents_name_is_defined() -> None:
    """Every name on docs/architecture.md; elsewhere, those of an owner the package has
    (the other documents also name other libraries' constants: `StreamingMode.SSE`)."""
    defined = defined_constants()
    owners = {owner for owner, _ in defined}
    missing: list[str] = []
    for doc in DOCUMENTS:
        named = {(owner, name) for owner, name in CONSTANT.findall(doc.read_text())
                 if doc == ARCHITECTURE or owner in owners}
        missing += sorted(f"{doc.relative_to(ROOT)} names `{owner}.{name}`, which no module "
                          "or class of src/outlast/ defines: name the constant as the code "
                          "does now" for owner, name in named - defined)
    assert ("sqlite", "RECLAIM_PAGES") in set(CONSTANT.findall(ARCHITECTURE.read_text())), \
        "the check no longer reads the names"
    assert not missing, "\n".join(missing)


# A constant named, then its value beside it: "`STATE_ROW_SPAN` (64)".
VALUE_BESIDE_NAME = re.compile(r"`(?:\w+\.)?[A-Z][A-Z0-9_]+`\s*(?:\(|=|:)\s*\d")
# A flag of `outlast serve`, then its default in the same clause: "`--lease-ttl`,
# default 10 s" (`outlast serve --help` says each default; the documents name the flag).
FLAG_DEFAULT = re.compile(r"`(--[\w-]+)`[^.;`]{0,40}?\bdefault:?\s+\d")


def copied_values(text: str, flags: set[str]) -> list[tuple[int, str]]:
    """(line, words) where ``text`` copies a value instead of naming what holds it."""
    found = [(text.count("\n", 0, m.start()) + 1, m.group(0))
             for m in VALUE_BESIDE_NAME.finditer(text)]
    found += [(text.count("\n", 0, m.start()) + 1, m.group(0))
              for m in FLAG_DEFAULT.finditer(text) if m.group(1) in flags]
    return sorted(found)


def test_the_documents_name_constants_and_flags_rather_than_copy_their_values() -> None:
    flags = {o.flag for o in options()}
    problems = [f"{doc.relative_to(ROOT)} line {line}: {words!r} copies a value: name the "
                "constant or the flag alone (a value copied goes stale when the code "
                "changes)" for doc in DOCUMENTS for line, words in
                copied_values(doc.read_text(), flags)]
    assert not problems, "\n".join(problems)


def test_the_copy_check_finds_a_value_beside_its_name() -> None:
    text = ("within `STATE_ROW_SPAN` (64) events\n(`--lease-ttl`, default 10 s), and\n"
            "`retry_for` (default 60 s) and `--keepalive` seconds, `sqlwrite.STATE_ROW_SPAN`\n")
    assert copied_values(text, {"--lease-ttl", "--keepalive"}) == [
        (1, "`STATE_ROW_SPAN` (6"), (2, "`--lease-ttl`, default 1")]
