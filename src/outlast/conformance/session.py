"""What every check shares: the endpoint, the runs' inputs, what the server advertised,
the reference run, and the streams read so far (``valid`` judges them all)."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urljoin

from outlast.conformance.wire import Exchange, Frame, Wire, final_event

BINDING = "0.1"  # the version of docs/resumable-ag-ui.md the checks follow

# Paths of the run resources, relative to the endpoint URL, when the server advertises
# none (docs/resumable-ag-ui.md §11).
DEFAULT_EVENTS = "../runs/{runId}/events"
DEFAULT_CANCEL = "../runs/{runId}/cancel"
DETAILS_KEY = "resumableAgUi"

# Fast enough for the demo agent to finish in about two seconds.
DEFAULT_PROMPT = "Plan the work, then do it step by step."
DEFAULT_PROPS: dict[str, Any] = {"demo": {"steps": 3, "step_delay_ms": 300,
                                          "tokens_per_message": 6, "token_delay_ms": 30}}
DEFAULT_APPROVAL_PROMPT = "Do the work, but ask me before the risky step."
DEFAULT_APPROVAL_PROPS: dict[str, Any] = {"demo": {"steps": 2, "approve_at": [1],
                                                   "step_delay_ms": 200,
                                                   "tokens_per_message": 6,
                                                   "token_delay_ms": 30}}


@dataclass
class Options:
    """What ``outlast check`` was asked (its flags)."""

    url: str
    prompt: str = DEFAULT_PROMPT
    forwarded_props: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_PROPS))
    approval_prompt: str = DEFAULT_APPROVAL_PROMPT
    approval_forwarded_props: dict[str, Any] = field(
        default_factory=lambda: dict(DEFAULT_APPROVAL_PROPS))
    approval_payload: dict[str, Any] = field(default_factory=lambda: {"approved": True})
    restart_cmd: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 30.0  # the longest any one run may take
    cancel_within: float = 1.0
    only: list[str] | None = None


@dataclass
class Stream:
    """A stream the checker read to its end, for ``valid``: what it continues (the
    events a client held, and tool calls of an earlier run it answers)."""

    label: str
    events: list[dict[str, Any]]
    held: list[dict[str, Any]] = field(default_factory=list)
    owed: set[str] = field(default_factory=set)


def text_of(content: Any) -> str:
    """A message's text, whether its content is a string or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content
                       if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def texts(frames: list[Frame]) -> list[tuple[str, str]]:
    """(messageId, text) of each text message a stream carries, in order of start."""
    order: list[str] = []
    body: dict[str, str] = {}
    for f in frames:
        e = f.event
        mid = e.get("messageId")
        if not isinstance(mid, str):
            continue
        if f.type in ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CHUNK") and mid not in body:
            order.append(mid)
            body[mid] = ""
        if f.type in ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CHUNK") and \
                isinstance(e.get("delta"), str):
            body[mid] = body.get(mid, "") + e["delta"]
    return [(m, body[m]) for m in order]


def signature(event: dict[str, Any]) -> dict[str, Any]:
    """An event without its timestamp (two deliveries of one event compare equal)."""
    return {k: v for k, v in event.items() if k not in ("timestamp", "rawEvent")}


class Session:
    """One ``outlast check`` against one endpoint."""

    def __init__(self, options: Options, wire: Wire) -> None:
        self.options = options
        self.url = options.url
        self.wire = wire
        self.tag = uuid.uuid4().hex[:8]
        self.capabilities: dict[str, Any] | None = None
        self.capabilities_source: str | None = None
        self.streams: list[Stream] = []
        self.reference: Exchange | None = None
        self.reference_thread = ""
        self._restart_lock = asyncio.Lock()

    # -- what the server advertised (§11) ------------------------------------
    @property
    def details(self) -> dict[str, Any]:
        custom = (self.capabilities or {}).get("custom")
        value = custom.get(DETAILS_KEY) if isinstance(custom, dict) else None
        return value if isinstance(value, dict) else {}

    def advertised(self, *path: str) -> Any:
        """A capability's value (``None`` when not declared, which is not ``False``)."""
        node: Any = self.capabilities or {}
        for key in path:
            if not isinstance(node, dict):
                return None
            node = node.get(key)
        return node

    def resource(self, name: str, run_id: str) -> str:
        default = DEFAULT_EVENTS if name == "events" else DEFAULT_CANCEL
        template = self.details.get(name)
        template = template if isinstance(template, str) else default
        return urljoin(self.url, template.replace("{runId}", quote(run_id, safe="")))

    # -- inputs -----------------------------------------------------------------
    def ids(self, check: str) -> tuple[str, str]:
        """A fresh (threadId, runId) for a check."""
        n = uuid.uuid4().hex[:6]
        return f"chk-{self.tag}-{check}-{n}", f"chk-{self.tag}-{check}-{n}-run"

    def run_input(self, thread_id: str, run_id: str, *, approval: bool = False,
                  text: str | None = None) -> dict[str, Any]:
        """A ``RunAgentInput`` with one new user message."""
        o = self.options
        prompt = text or (o.approval_prompt if approval else o.prompt)
        return {
            "threadId": thread_id, "runId": run_id, "protocolVersion": "1.0",
            "state": {}, "tools": [], "context": [],
            "messages": [{"id": f"{run_id}-user", "role": "user", "content": prompt}],
            "forwardedProps": o.approval_forwarded_props if approval else o.forwarded_props,
        }

    def hydration_input(self, thread_id: str) -> dict[str, Any]:
        """§6: no messages and no resume."""
        return {"threadId": thread_id, "runId": f"chk-{self.tag}-hydrate-{uuid.uuid4().hex[:6]}",
                "protocolVersion": "1.0", "state": {}, "tools": [], "context": [],
                "messages": [], "forwardedProps": {}}

    def answer_input(self, thread_id: str, interrupts: list[dict[str, Any]]
                     ) -> dict[str, Any]:
        """§9: the next input on the thread answers every pending interrupt."""
        run_id = f"chk-{self.tag}-answer-{uuid.uuid4().hex[:6]}"
        return {"threadId": thread_id, "runId": run_id, "protocolVersion": "1.0",
                "state": {}, "tools": [], "context": [], "messages": [],
                "forwardedProps": self.options.approval_forwarded_props,
                "resume": [{"interruptId": i.get("id"), "status": "resolved",
                            "payload": self.options.approval_payload} for i in interrupts]}

    # -- requests -----------------------------------------------------------------
    async def post(self, body: dict[str, Any], *, headers: dict[str, str] | None = None,
                   within: float | None = None, **kw: Any) -> Exchange:
        """POST a ``RunAgentInput`` to the endpoint and read its stream."""
        return await self.wire.stream("POST", self.url, body=body, headers=headers,
                                      within=within or self.options.timeout, **kw)

    def keep(self, ex: Exchange, label: str, *, held: list[dict[str, Any]] | None = None,
             owed: set[str] | None = None) -> None:
        """Hand a stream to ``valid`` when the server ended it (a whole stream)."""
        if ex.ended and ex.status is not None and ex.status < 300 and ex.frames:
            self.streams.append(Stream(label, ex.events, held or [], owed or set()))

    async def hydrate(self, thread_id: str, *, within: float = 5.0) -> Exchange:
        """§6: the thread as a new client sees it; read up to its MESSAGES_SNAPSHOT and
        the event after it (the active run's first, or the end), then dropped."""
        seen: list[bool] = [False]

        def stop(f: Frame) -> bool:
            if seen[0]:
                return True
            if f.type == "MESSAGES_SNAPSHOT":
                seen[0] = True
            return f.type in ("RUN_FINISHED", "RUN_ERROR")

        return await self.wire.stream("POST", self.url, body=self.hydration_input(thread_id),
                                      within=within, stop=stop)

    async def wait_thread(self, thread_id: str, done: Any, deadline: float
                          ) -> tuple[Any, list[Exchange]]:
        """Hydrate the thread until ``done(exchange)`` returns something truthy or the
        deadline passes; returns it (or None) and the first and last hydrations."""
        tried: list[Exchange] = []
        while True:
            left = deadline - time.monotonic()
            ex = await self.hydrate(thread_id, within=max(1.0, min(5.0, left)))
            tried = [tried[0], ex] if tried else [ex]
            value = done(ex)
            if value or time.monotonic() >= deadline:
                return value, tried
            await asyncio.sleep(0.3)

    # -- the reference run --------------------------------------------------------
    def final_text(self) -> str | None:
        """The last text message of the reference run: a run is complete when its
        thread shows it."""
        if self.reference is None:
            return None
        said = [t for _, t in texts(self.reference.frames) if t.strip()]
        return said[-1] if said else None

    @property
    def run_seconds(self) -> float:
        """How long the reference run took."""
        if self.reference is None or not self.reference.frames:
            return self.options.timeout
        return self.reference.frames[-1].at - self.reference.started


def snapshot_messages(ex: Exchange) -> list[dict[str, Any]] | None:
    """The messages of the last MESSAGES_SNAPSHOT in a stream (None without one)."""
    snaps = [f.event for f in ex.frames if f.type == "MESSAGES_SNAPSHOT"]
    if not snaps:
        return None
    messages = snaps[-1].get("messages")
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else None


def after_user(messages: list[dict[str, Any]], user_id: str) -> list[dict[str, Any]] | None:
    """The messages after the user message ``user_id`` (None when it is not there)."""
    for i, m in enumerate(messages):
        if m.get("id") == user_id:
            return messages[i + 1:]
    return None


def pending_interrupts(ex: Exchange) -> list[dict[str, Any]]:
    """§9: the interrupts a stream's end says are pending."""
    final = final_event(ex)
    if final is None or final.get("type") != "RUN_FINISHED":
        return []
    outcome = final.get("outcome")
    if not isinstance(outcome, dict) or outcome.get("type") != "interrupt":
        return []
    found = outcome.get("interrupts")
    return [i for i in found if isinstance(i, dict)] if isinstance(found, list) else []
