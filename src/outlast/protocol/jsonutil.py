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
