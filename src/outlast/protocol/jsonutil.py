"""JSON helpers for the fold: fast cloning and atomic JSON Patch application."""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
import jsonpointer
import orjson

# Everything a malformed or non-applicable patch can raise.
PATCH_ERRORS = (
    jsonpatch.JsonPatchException,
    jsonpointer.JsonPointerException,
    KeyError,
    IndexError,
    TypeError,
    ValueError,
    AttributeError,
)


_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)  # stateless; built once
_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS
_orjson_dumps = orjson.dumps


def dumps(value: Any) -> str:
    """Compact JSON: the encoding of the event log, snapshots and the wire.

    orjson on the hot path (every event is encoded once); the standard library for
    what orjson refuses (integers past 64 bits, say), so anything JSON-able encodes."""
    try:
        # Positional: orjson's keyword handling costs as much as encoding a small event.
        return _orjson_dumps(value, None, _ORJSON_OPTIONS).decode()
    except TypeError:
        return _JSON.encode(value)


def clone_json(value: Any) -> Any:
    """Deep copy of a JSON value (much faster than ``copy.deepcopy``)."""
    kind = type(value)
    if kind is dict:
        return {k: clone_json(v) for k, v in value.items()}
    if kind is list:
        return [clone_json(v) for v in value]
    return value


def clone_message(message: dict[str, Any]) -> dict[str, Any]:
    """Deep copy of a replayed message; a null ``subagentRunId`` reads as absent."""
    return own_message(clone_json(message))


def own_message(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` itself, as ``clone_message`` would have copied it: a null
    ``subagentRunId`` removed."""
    if "subagentRunId" in message and message["subagentRunId"] is None:
        del message["subagentRunId"]
    return message


def apply_json_patch(document: Any, operations: Any) -> Any:
    """Apply a JSON Patch and return the new document; raises on any failure.

    `document` itself is never modified: each operation first copies the containers on
    its path (path copying), so the result shares every untouched subtree with `document`.
    A failing patch therefore leaves nothing half-applied, as with fast-json-patch on the
    client, and costs O(patch x path width) rather than a deep copy of the document.
    """
    if not isinstance(operations, list):
        raise TypeError("a JSON Patch is a list of operations")
    plain = _plain_patch(document, operations)
    if plain is not _NOT_PLAIN:
        return plain
    # Cloned so that values added to the document never alias the event.
    operations = clone_json(operations)
    owned: set[int] = set()  # id() of containers copied for this patch
    for operation in operations:
        step = _operation(operation)
        document = _own_path(document, step.pointer.parts, owned)
        if type(step) is jsonpatch.MoveOperation:
            # `move` also mutates the container it takes its value from.
            source = jsonpointer.JsonPointer(operation.get("from"))
            document = _own_path(document, source.parts, owned)
        document = step.apply(document)
    return document


_NOT_PLAIN = object()
_PLAIN_OPS = frozenset({"add", "replace", "remove"})


def _index(part: str, size: int) -> int | None:
    """``part`` as an index of a list of ``size`` (RFC 6901: no leading zeros), or None."""
    if part == "0" or (part[:1] in "123456789" and part.isascii() and part.isdigit()):
        index = int(part)
        return index if index < size else None
    return None


def _plain_patch(document: Any, operations: list[Any]) -> Any:
    """The common patch (``add``, ``replace`` or ``remove`` at a path of plain keys and
    indexes, every step of it present) applied by path copying, as ``jsonpatch`` would
    apply it; ``_NOT_PLAIN`` for anything else (which ``jsonpatch`` then applies, or
    refuses with its own error), ``document`` untouched either way."""
    owned: set[int] = set()
    root = document
    for operation in operations:
        if type(operation) is not dict:
            return _NOT_PLAIN
        kind, path = operation.get("op"), operation.get("path")
        if kind not in _PLAIN_OPS or type(path) is not str or path[:1] != "/" \
                or "~" in path or (kind != "remove" and "value" not in operation):
            return _NOT_PLAIN
        if type(root) not in (dict, list):
            return _NOT_PLAIN
        parts = path[1:].split("/")
        root = _own_path(root, parts, owned)
        node: Any = root
        for part in parts[:-1]:  # owned now, where present: find the parent
            key: Any = part if type(node) is dict else _index(part, len(node))
            if key is None or (type(node) is dict and part not in node) \
                    or type(node[key]) not in (dict, list):
                return _NOT_PLAIN
            node = node[key]
        last = parts[-1]
        value = clone_json(operation["value"]) if kind != "remove" else None
        if type(node) is dict:
            if kind == "add":
                node[last] = value
            elif last not in node:
                return _NOT_PLAIN
            elif kind == "replace":
                node[last] = value
            else:
                del node[last]
            continue
        if kind == "add" and last == "-":
            node.append(value)
            continue
        index = _index(last, len(node) + (kind == "add"))
        if index is None:
            return _NOT_PLAIN
        if kind == "add":
            node.insert(index, value)
        elif kind == "replace":
            node[index] = value
        else:
            del node[index]
    return root


def _operation(operation: Any) -> jsonpatch.PatchOperation:
    """One operation, checked as ``jsonpatch.JsonPatch`` checks it (which would build it
    once to check the patch and again to apply it)."""
    op = operation.get("op") if isinstance(operation, dict) else None
    kind = jsonpatch.JsonPatch.operations.get(op) if isinstance(op, str) else None
    if kind is None:
        raise jsonpatch.InvalidJsonPatch(f"not a JSON Patch operation: {operation!r}")
    return kind(operation)  # checks its path


def _own_path(root: Any, parts: list[str], owned: set[int]) -> Any:
    """Copy, unless already copied, every container from `root` to the parent of `parts`."""
    if type(root) in (dict, list) and id(root) not in owned:
        root = root.copy()
        owned.add(id(root))
    node = root
    for part in parts[:-1]:
        key: Any
        if type(node) is dict and part in node:
            key = part
        elif type(node) is list and part.isdigit() and int(part) < len(node):
            key = int(part)
        else:
            break  # the operation will fail on its own; nothing below is touched
        child = node[key]
        if type(child) not in (dict, list):
            break
        if id(child) not in owned:
            child = child.copy()
            owned.add(id(child))
            node[key] = child
        node = child
    return root
