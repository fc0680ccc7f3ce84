"""How the CLI shows runs, threads and events to a person (``--json`` bypasses all this)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any, TextIO

from outlast.client import Interrupt, RunRecord, Thread, ThreadSummary


class Style:
    """ANSI styles, or none: colors only on a terminal and when ``NO_COLOR`` is unset."""

    def __init__(self, color: bool) -> None:
        self.color = color

    @classmethod
    def for_stream(cls, stream: TextIO) -> Style:
        """The style for what is printed on ``stream``."""
        return cls(stream.isatty() and not os.environ.get("NO_COLOR"))

    def _wrap(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color and text else text

    def dim(self, text: str) -> str:
        """Secondary information."""
        return self._wrap("2", text)

    def bold(self, text: str) -> str:
        """Headers and roles."""
        return self._wrap("1", text)

    def red(self, text: str) -> str:
        """Failures."""
        return self._wrap("31", text)

    def green(self, text: str) -> str:
        """Success."""
        return self._wrap("32", text)

    def yellow(self, text: str) -> str:
        """Waiting for a person."""
        return self._wrap("33", text)


def short(text: str, limit: int = 72) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def short_args(raw: Any, limit: int = 60) -> str:
    """Tool arguments as ``name=value, ...`` (JSON text or an object)."""
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return short(raw, limit)
    if isinstance(value, dict):
        parts = [f"{k}={v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
                 for k, v in value.items()]
        return short(", ".join(parts), limit)
    return short(json.dumps(value, ensure_ascii=False), limit)


def content_text(content: Any) -> str:
    """A message's content as text (AG-UI content may be a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", f"[{p.get('type', 'part')}]")) for p in content
                        if isinstance(p, dict))
    return "" if content is None else str(content)


def when(ts: float | None) -> str:
    """A timestamp (seconds) in local time."""
    if ts is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def table(rows: Sequence[Sequence[str]], header: Sequence[str], style: Style) -> str:
    """Aligned columns; the last one is not padded."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]

    def line(cells: Sequence[str]) -> str:
        padded = [c.ljust(w) for c, w in zip(cells, widths, strict=False)]
        return "  ".join([*padded, cells[-1]]).rstrip()

    return "\n".join([style.bold(line(header)), *(line(r) for r in rows)])


def threads_table(threads: Sequence[ThreadSummary], style: Style) -> str:
    """``outlast threads``."""
    rows = [(t.thread_id, t.status, when(t.updated_at), short(t.title or "", 50))
            for t in threads]
    return table(rows, ("THREAD", "STATUS", "UPDATED", "TITLE"), style)


def runs_table(runs: Sequence[RunRecord], style: Style) -> str:
    """``outlast runs``."""
    rows = [(r.run_id, r.status, r.agent, str(r.last_seq), str(r.attempts), when(r.created_at))
            for r in runs]
    return table(rows, ("RUN", "STATUS", "AGENT", "EVENTS", "ATTEMPTS", "CREATED"), style)


def interrupt_line(i: Interrupt, thread_id: str, style: Style) -> str:
    """One pending interrupt, with how to answer it."""
    what = i.message or i.reason or "input needed"
    if i.in_doubt:
        hint = style.dim(f"  (outlast answer {thread_id} --happened --result JSON | "
                         "--run-again | --fail)")
        return style.yellow(f"did it happen? {short(what, 90)}") + hint
    hint = style.dim(f"  (outlast answer {thread_id} --approve | --deny)")
    return style.yellow(f"approval needed: {short(what, 90)}") + hint


def run_text(r: RunRecord, style: Style) -> str:
    """``outlast run``."""
    status = {"succeeded": style.green, "failed": style.red,
              "interrupted": style.yellow}.get(r.status, str)(r.status)
    lines = [f"{style.bold('run')} {r.run_id}  {status}",
             f"thread    {r.thread_id}", f"agent     {r.agent}",
             f"events    {r.last_seq}", f"attempts  {r.attempts}",
             f"created   {when(r.created_at)}", f"started   {when(r.started_at)}",
             f"finished  {when(r.finished_at)}"]
    if r.cancel_requested and not r.final:
        lines.append(style.yellow("cancelling"))
    if r.outcome:
        lines.append(f"outcome   {r.outcome.get('type', '?')}")
    if r.error:
        lines.append(style.red(f"error     {r.error.get('code', '?')}: "
                               f"{short(str(r.error.get('message', '')), 90)}"))
    lines.extend(interrupt_line(i, r.thread_id, style) for i in r.interrupts if i.pending)
    return "\n".join(lines)


def thread_text(t: Thread, style: Style) -> str:
    """``outlast thread``: the conversation as of the snapshot, then what is pending."""
    head = f"{style.bold('thread')} {t.thread_id}  {t.status}"
    if t.title:
        head += f"  {style.dim(short(t.title, 50))}"
    lines = [head]
    if t.active_run is not None:
        a = t.active_run
        lines.append(style.dim(f"active run {a.run_id} ({a.status}, seq {a.last_seq}): "
                               f"outlast tail {a.run_id}"))
    names: dict[str, str] = {}
    for m in t.messages:
        role = str(m.get("role", "?"))
        if role == "tool":
            name = names.get(str(m.get("toolCallId")), "tool")
            lines.append(f"  {style.dim('->')} {name}: {short(content_text(m.get('content')))}")
            continue
        text = content_text(m.get("content"))
        if text:
            lines.append(f"{style.bold(role + ':')} {text}")
        for call in m.get("toolCalls") or []:
            fn = call.get("function") or {}
            names[str(call.get("id"))] = str(fn.get("name", "tool"))
            lines.append(f"  tool {fn.get('name', '?')}({short_args(fn.get('arguments'))})")
    lines.extend(interrupt_line(i, t.thread_id, style) for i in t.pending_interrupts)
    return "\n".join(lines)


class TailPrinter:
    """Prints a run's events as a person reads them: streamed text on one line per
    message prefixed by its role, one line per tool call and one per its result, the
    approvals asked for, and how the run ended. State changes print nothing."""

    def __init__(self, out: TextIO, style: Style) -> None:
        self.out = out
        self.style = style
        self.owner: str | None = None  # what the unfinished line on screen belongs to
        self.roles: dict[str, str] = {}
        self.calls: dict[str, dict[str, str]] = {}

    def _open(self, owner: str, prefix: str) -> None:
        if self.owner != owner:
            self._end_line()
            self.out.write(prefix)
            self.owner = owner

    def _end_line(self) -> None:
        if self.owner is not None:
            self.out.write("\n")
            self.owner = None

    def _line(self, text: str) -> None:
        self._end_line()
        self.out.write(text + "\n")

    def _text(self, key: str, delta: str, role: str) -> None:
        prefix = self.style.dim("thinking: ") if role == "reasoning" \
            else self.style.bold(f"{role}: ")
        self._open(f"text:{key}", prefix)
        self.out.write(self.style.dim(delta) if role == "reasoning" else delta)

    def event(self, event: dict[str, Any]) -> None:
        """Show one stored event."""
        kind = event.get("type")
        s = self.style
        if kind == "RUN_STARTED":
            self._line(s.dim(f"run {event.get('runId')} on thread {event.get('threadId')}"))
        elif kind in ("TEXT_MESSAGE_START", "REASONING_MESSAGE_START"):
            role = "reasoning" if kind.startswith("REASONING") else event.get("role", "assistant")
            self.roles[str(event.get("messageId"))] = str(role)
        elif kind in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"):
            # Chunk events are expanded before they are stored: only these carry text.
            mid = str(event.get("messageId"))
            default = "reasoning" if kind.startswith("REASONING") else "assistant"
            self._text(mid, str(event.get("delta") or ""), self.roles.get(mid, default))
        elif kind in ("TEXT_MESSAGE_END", "REASONING_MESSAGE_END"):
            if self.owner == f"text:{event.get('messageId')}":
                self._end_line()
        elif kind == "TOOL_CALL_START":
            self.calls[str(event.get("toolCallId"))] = {
                "name": str(event.get("toolCallName") or "tool"), "args": ""}
        elif kind == "TOOL_CALL_ARGS":
            call = self.calls.setdefault(str(event.get("toolCallId")),
                                         {"name": "tool", "args": ""})
            call["args"] += str(event.get("delta") or "")
        elif kind == "TOOL_CALL_END":
            # A whole line at once: its result may come much later (an approval), and
            # a note on stderr in between must not join it.
            call = self.calls.get(str(event.get("toolCallId")), {"name": "tool", "args": ""})
            self._line(f"{s.bold('tool')} {call['name']}({short_args(call['args'])})")
        elif kind == "TOOL_CALL_RESULT":
            self._result(event)
        elif kind == "RUN_FINISHED":
            self._finished(event)
        elif kind == "RUN_ERROR":
            self._line(s.red(f"run failed: {event.get('code') or 'error'}: "
                             f"{short(str(event.get('message', '')), 120)}"))
        elif kind == "CUSTOM" and event.get("name") == "outlast.resumed":
            value = event.get("value") or {}
            self._line(s.dim(f"resumed after a crash (attempt {value.get('attempt', '?')}, "
                             f"from seq {value.get('resumedFromSeq', '?')})"))
        # State, snapshots, steps and other custom events: nothing a person reads.
        self.out.flush()

    def _result(self, event: dict[str, Any]) -> None:
        """A tool's result, on its own line, labelled by the tool's name (as ``outlast
        thread`` shows it)."""
        name = self.calls.get(str(event.get("toolCallId")), {}).get("name", "tool")
        summary = short(content_text(event.get("content")), 80)
        self._line(f"  {self.style.dim('->')} {name}: {summary}")

    def break_line(self) -> None:
        """End an unfinished line before something else (a note on stderr) is shown."""
        if self.owner is not None:
            self._end_line()
            self.out.flush()

    def _finished(self, event: dict[str, Any]) -> None:
        s = self.style
        outcome = event.get("outcome") or {}
        kind = outcome.get("type") if isinstance(outcome, dict) else None
        if kind == "interrupt":
            for raw in outcome.get("interrupts") or []:
                i = Interrupt.from_json(raw)
                self._line(interrupt_line(i, str(event.get("threadId")), s))
            self._line(s.yellow("run interrupted: waiting for an answer"))
        elif kind == "cancelled":
            self._line(s.yellow("run cancelled"))
        else:
            result = event.get("result")
            extra = ""
            if result is not None:
                text = result if isinstance(result, str) else short_args(result)
                extra = s.dim(f"  result: {short(text, 80)}")
            self._line(s.green("run succeeded") + extra)

    def close(self) -> None:
        """End an unfinished line (a stream cut short)."""
        self._end_line()
        self.out.flush()
