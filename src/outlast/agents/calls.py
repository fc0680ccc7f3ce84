"""A tool call as the hosts show it: the interrupt that asks a person to approve it (its
arguments quoted as the in-doubt question quotes them), and its result as the text a
tool message carries."""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import to_jsonable_python

from outlast.agent.in_doubt import shown_args as shown_args  # quoted as questions quote


def approval_schema(*, reason: bool = True, edits: bool = False) -> dict[str, Any]:
    """The answer an approval takes: ``approved``, with the person's ``reason`` and
    ``editedArgs`` when the host passes them on."""
    properties: dict[str, Any] = {"approved": {"type": "boolean"}}
    if reason:
        properties["reason"] = {"type": "string"}
    if edits:
        properties["editedArgs"] = {"type": "object"}
    return {"type": "object", "properties": properties, "required": ["approved"]}


def approval(call_id: str, tool: Any, args: Any, kind: str, *, reason: bool = True,
             edits: bool = False, **metadata: Any) -> dict[str, Any]:
    """The interrupt that asks a person whether the call ``call_id`` of ``tool`` runs:
    ``kind`` names the host's answers in its metadata, with ``metadata`` besides."""
    return {
        "id": f"approve-{call_id}", "reason": "tool_call", "toolCallId": call_id,
        "message": f"Run {tool}({shown_args(args)})?",
        "responseSchema": approval_schema(reason=reason, edits=edits),
        "metadata": {"kind": kind, "tool": tool, "args": args, **metadata},
    }


def result_text(value: Any) -> str:
    """A tool's result as the text its tool message carries: a string as it is, anything
    else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False)
