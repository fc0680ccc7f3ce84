"""Builders for the events the engine itself makes: one function per event type.

Agents never emit the run's own lifecycle events (``RESERVED``); the engine opens
and ends every run, and streams synthesize a ``RUN_STARTED`` when they start mid-run.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

Event = dict[str, Any]

RESERVED = frozenset({"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR"})
"""Run lifecycle events: made by the engine, refused from agents and proxied endpoints."""

PROTOCOL_VERSION = "1.0"

FINISH = "finishReason"
"""Message metadata key: how the model's turn that wrote a reply ended. Hosts set it;
the engine sets ``FAILED`` on an assistant reply a failed run left open."""
FAILED = "error"
"""The finish reason of a reply cut off by its run's failure."""


def now_ms() -> int:
    """An AG-UI timestamp: milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def run_started(thread_id: str, run_id: str, *, input: Event | None = None,
                timestamp: int | None = None) -> Event:
    """``RUN_STARTED``; ``input`` echoes what the run adds to the thread."""
    event: Event = {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id,
                    "protocolVersion": PROTOCOL_VERSION}
    if input is not None:
        event["input"] = input
    if timestamp is not None:
        event["timestamp"] = timestamp
    return event


def run_finished(thread_id: str, run_id: str, *, outcome: Event | None = None,
                 result: Any = None, timestamp: int | None = None) -> Event:
    """``RUN_FINISHED``, with an ``outcome`` (interrupt, cancelled, ...) when not plain success."""
    event: Event = {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id}
    if outcome is not None:
        event["outcome"] = outcome
    if result is not None:
        event["result"] = result
    if timestamp is not None:
        event["timestamp"] = timestamp
    return event


def run_error(message: str, code: str, *, timestamp: int | None = None) -> Event:
    """``RUN_ERROR`` with a typed ``code``."""
    event: Event = {"type": "RUN_ERROR", "message": message, "code": code}
    if timestamp is not None:
        event["timestamp"] = timestamp
    return event


def state_snapshot(state: Any) -> Event:
    """``STATE_SNAPSHOT``."""
    return {"type": "STATE_SNAPSHOT", "snapshot": state}


def messages_snapshot(messages: list[dict[str, Any]]) -> Event:
    """``MESSAGES_SNAPSHOT``."""
    return {"type": "MESSAGES_SNAPSHOT", "messages": messages}


def parse_time(value: Any) -> float | None:
    """An ISO 8601 time (an interrupt's ``expiresAt``) as a Unix time, or None."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
