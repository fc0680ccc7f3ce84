"""JSON views of stored records (camelCase on the wire, as AG-UI does)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:  # record types only: the edge reads them through the engine
    from collections.abc import Sequence

    from outlast.store.base import (
        InterruptRecord,
        RunRecord,
        Snapshot,
        ThreadRecord,
        WebhookRecord,
    )


def interrupt_view(i: InterruptRecord) -> dict[str, Any]:
    """An interrupt with its durable status (G7); past ``expiresAt`` a pending one
    shows as ``expired`` (it can then only be cancelled)."""
    status = i.status
    if status == "pending" and i.expires_ts is not None and i.expires_ts <= time.time():
        status = "expired"
    return {
        **i.body, "status": status, "runId": i.run_id, "answeredBy": i.answered_by,
        "answeredAt": i.answered_at,
        "resolution": i.resolution,
    }


def active_view(run: RunRecord | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {"runId": run.id, "status": run.status, "lastSeq": run.last_seq}


def webhook_view(h: WebhookRecord) -> dict[str, Any]:
    """One delivery of a run's end (G12): its status and attempts. The URL shows only
    scheme, host and path: credentials or a token in its query stay with the server."""
    parts = urlsplit(h.url)
    host = parts.netloc.rpartition("@")[2]
    return {
        "webhookId": h.id, "type": h.type, "url": f"{parts.scheme}://{host}{parts.path}",
        "status": h.status, "attempts": h.attempts, "lastStatus": h.last_status,
        "lastError": h.last_error, "createdAt": h.created_at, "expiresAt": h.expires_at,
        "deliveredAt": h.delivered_at,
        "nextAttemptAt": h.next_at if h.status == "pending" else None,
    }


def run_view(run: RunRecord, interrupts: list[InterruptRecord],
             webhooks: Sequence[WebhookRecord] | None = None) -> dict[str, Any]:
    """``GET /runs/{id}``; with ``webhooks``, the deliveries of its end (G12)."""
    view = {
        "runId": run.id, "threadId": run.thread_id, "agent": run.agent, "status": run.status,
        "createdAt": run.created_at, "startedAt": run.started_at,
        "finishedAt": run.finished_at, "attempts": run.attempts, "lastSeq": run.last_seq,
        "outcome": run.outcome, "error": run.error,
        "cancelRequested": run.cancel_requested,
        "compactedAt": run.compacted_at,
        "interrupts": [interrupt_view(i) for i in interrupts if i.status == "pending"],
    }
    if webhooks is not None:
        view["webhooks"] = [webhook_view(h) for h in webhooks]
    return view


def thread_summary(t: ThreadRecord) -> dict[str, Any]:
    """One item of ``GET /threads``."""
    return {"threadId": t.id, "title": t.title, "status": t.status,
            "createdAt": t.created_at, "updatedAt": t.updated_at, "forkedFrom": t.forked_from}


def thread_view(t: ThreadRecord, snap: Snapshot, interrupts: list[InterruptRecord],
                active: RunRecord | None) -> dict[str, Any]:
    """``GET /threads/{id}``: the snapshot, never its session_state."""
    return {
        **thread_summary(t),
        "messages": snap.messages,
        "state": snap.state,
        "interrupts": [interrupt_view(i) for i in interrupts],
        "asOf": None if snap.as_of_run is None else {"runId": snap.as_of_run,
                                                      "seq": snap.as_of_seq},
        "activeRun": active_view(active),
    }
