"""The chat-completions wire format: request messages out, streamed chunks in.

One owner for the format's quirks: assistant messages with tool calls carry
``"content": ""`` (llama.cpp refuses ``null``), a reply that never finished is
not sent back as a finished turn, and tool calls arrive in pieces by ``index``
(OpenAI sends id and name in the first piece only, llama.cpp repeats them).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from outlast.agents.resume import unfinished
from outlast.protocol.content import text_of

NO_RESULT = "No result was given for this call."


def to_openai(messages: list[dict[str, Any]],
              system_prompt: str | None = None) -> list[dict[str, Any]]:
    """AG-UI messages as chat-completions messages, in order and complete.

    Unfinished replies (cut off by a crash or an error) and the results of their
    tool calls are left out; a call that never got a result is given a placeholder
    one, because the chat-completions format refuses a call without an answer."""
    out: list[dict[str, Any]] = []
    if system_prompt:
        out.append({"role": "system", "content": system_prompt})
    skipped: set[str] = set()
    answered = {m.get("toolCallId") for m in messages if m.get("role") == "tool"}
    for m in messages:
        role = m.get("role")
        if role in ("user", "system", "developer"):
            out.append({"role": "system" if role == "developer" else role,
                        "content": text_of(m.get("content"))})
        elif role == "assistant":
            calls = m.get("toolCalls") or []
            if unfinished(m):
                skipped.update(c.get("id") for c in calls)
                continue
            text = text_of(m.get("content"))
            if not text and not calls:
                continue
            item: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                item["tool_calls"] = [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["function"]["name"],
                                  "arguments": c["function"].get("arguments") or "{}"}}
                    for c in calls]
            out.append(item)
            out.extend({"role": "tool", "tool_call_id": c["id"], "content": NO_RESULT}
                       for c in calls if c["id"] not in answered)
        elif role == "tool" and m.get("toolCallId") not in skipped:
            content = m.get("content")
            out.append({"role": "tool", "tool_call_id": m.get("toolCallId"),
                        "content": content if isinstance(content, str)
                        else json.dumps(content)})
    return _drop_orphans(out)


def _drop_orphans(out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Without results for calls the model never made (or that were left out), and
    without a second result for one call: the format refuses both."""
    called: set[str] = set()
    fixed: list[dict[str, Any]] = []
    for item in out:
        if item["role"] == "assistant":
            called.update(c["id"] for c in item.get("tool_calls") or ())
        if item["role"] == "tool":
            if item["tool_call_id"] not in called:
                continue  # a result for a call the model never made (or one left out)
            called.discard(item["tool_call_id"])
        fixed.append(item)
    return fixed


def tool_spec(name: str, description: str | None, parameters: Any) -> dict[str, Any]:
    """A tool in the chat-completions ``tools`` list."""
    return {"type": "function", "function": {
        "name": name, "description": description or "",
        "parameters": parameters or {"type": "object", "properties": {}}}}


@dataclass
class CallPiece:
    """One tool call being assembled from streamed pieces."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    started: bool = False


@dataclass
class Usage:
    """Token counts summed over a run's model calls (AG-UI ``TokenUsage`` names)."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    reported: bool = False

    def add(self, usage: Any) -> None:
        """Add a chunk's ``usage`` object (ignored unless it has numbers)."""
        if not isinstance(usage, dict):
            return
        counts = [usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")]
        if not any(isinstance(c, int) and not isinstance(c, bool) for c in counts):
            return
        prompt, completion, total = (c if isinstance(c, int) else 0 for c in counts)
        self.input_tokens += prompt
        self.output_tokens += completion
        self.total_tokens += total or prompt + completion
        self.reported = True

    def add_counts(self, other: Usage) -> None:
        """Add another count's totals (one model call's to the run's)."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.total_tokens += other.total_tokens
        self.reported = self.reported or other.reported

    def to_json(self) -> dict[str, int] | None:
        """The ``usage`` of the run's result, or None when no server reported any."""
        if not self.reported:
            return None
        return {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens,
                "totalTokens": self.total_tokens}


@dataclass
class Turn:
    """What one model call produced."""

    message_id: str
    text: bool = False
    calls: list[CallPiece] = field(default_factory=list)
    finish: str | None = None


_BEARER = re.compile(r"(?i)(bearer\s+)[^\s\"',;]+")
_KEYISH = re.compile(r"(?i)((?:api[_-]?key|token|secret|password)[\"']?\s*[:=]\s*[\"']?)"
                     r"[^\s\"',;}]+")
_SK = re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}")


def scrub(text: str, *secrets: str | None) -> str:
    """``text`` without the given secrets, bearer tokens or key-looking values."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = _BEARER.sub(r"\1***", text)
    text = _KEYISH.sub(r"\1***", text)
    return _SK.sub("sk-***", text)


def error_detail(body: str) -> str | None:
    """The ``error.message`` (or ``message``/``detail``) of an error body, if it has one."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        for key in ("error", "message", "detail"):
            if isinstance(data.get(key), str):
                return str(data[key])
    return None
