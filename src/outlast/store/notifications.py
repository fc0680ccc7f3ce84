"""Cross-process notifications: one type per hint, one codec for the wire.

Notifications are hints only (the log stays the source of truth): a lost or
garbled one costs latency, never correctness, so ``decode`` drops what it cannot
read instead of failing the listener. This module is the one owner of the
channel names and payload formats that ``pg_notify`` carries between processes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger("outlast.store.notifications")

EVENTS = "outlast_events"
CANCEL = "outlast_cancel"
WORK = "outlast_work"
WEBHOOKS = "outlast_webhooks"
CHANNELS = (EVENTS, CANCEL, WORK, WEBHOOKS)


@dataclass(frozen=True)
class EventsCommitted:
    """A run's log grew to ``last_seq`` (``final``: with its final event)."""

    rid: int
    last_seq: int
    final: bool


@dataclass(frozen=True)
class CancelRequested:
    """Someone asked to stop run ``rid`` (G6); its lease holder stops it."""

    rid: int


@dataclass(frozen=True)
class WorkAvailable:
    """A run became startable (admitted, or its lease handed back): look for work."""


@dataclass(frozen=True)
class WebhookDue:
    """A run's end committed webhooks to deliver (G12): whoever is free claims them."""


Notification = EventsCommitted | CancelRequested | WorkAvailable | WebhookDue


def encode(n: Notification) -> tuple[str, str]:
    """The channel and text payload that carry ``n``."""
    if isinstance(n, EventsCommitted):
        return EVENTS, f"{n.rid}:{n.last_seq}:{1 if n.final else 0}"
    if isinstance(n, CancelRequested):
        return CANCEL, str(n.rid)
    if isinstance(n, WebhookDue):
        return WEBHOOKS, ""
    return WORK, ""


def decode(channel: str, payload: str) -> Notification | None:
    """The notification on ``channel`` with ``payload``; None (logged) if it is not one."""
    try:
        if channel == EVENTS:
            rid, last, final = payload.split(":")
            if final not in ("0", "1"):
                raise ValueError(f"final flag {final!r}")
            return EventsCommitted(_number(rid), _number(last), final == "1")
        if channel == CANCEL:
            return CancelRequested(_number(payload))
        if channel == WORK:
            return WorkAvailable()
        if channel == WEBHOOKS:
            return WebhookDue()
    except ValueError as exc:
        log.warning("dropping a malformed %s notification %r: %s", channel, payload[:100], exc)
        return None
    log.warning("dropping a notification on unknown channel %r", channel[:100])
    return None


def _number(text: str) -> int:
    # Digits only: int() would also take "+1", " 1" or "1_000".
    if not text.isascii() or not text.isdigit():
        raise ValueError(f"not a number: {text[:40]!r}")
    return int(text)
