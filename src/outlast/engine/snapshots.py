"""What one execution saves at its safe boundaries (G5): the thread's snapshot.

At a boundary the execution hands over its fold; what changed since the last save
(messages by position, the state, the agent's private ``session_state``) becomes a
``SnapshotWrite`` the writer commits with the events up to it. Saves are throttled by
``--snapshot-min-interval`` (and skipped in ``run_end`` mode) unless forced: between
them the changes keep accumulating in the fold. The host's snapshot hook hears of a
save once it is committed.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from typing import Any

from outlast.config import Settings
from outlast.engine.writer import RunChannel, Writer
from outlast.protocol.fold import ThreadFold
from outlast.protocol.jsonutil import dumps
from outlast.store.base import Snapshot, SnapshotWrite, Store


class Snapshots:
    """The snapshot side of one execution: message positions, the private session
    state, the throttle and the boundary waiting for its save."""

    def __init__(self, writer: Writer, channel: RunChannel, settings: Settings,
                 on_snapshot: Callable[[dict[str, Any]], None], *, thread_id: str,
                 run_id: str) -> None:
        self.writer, self.channel, self.settings = writer, channel, settings
        self.on_snapshot = on_snapshot
        self.thread_id, self.run_id = thread_id, run_id
        self.positions: dict[str, float] = {}
        self.session_state: dict[str, Any] = {}  # the agent's ctx.session_state
        self.pending: int | None = None  # a boundary the throttle has not saved yet
        self._last = 0.0
        self._saved_session = ""

    def load(self, snap: Snapshot) -> None:
        """Start from the thread's stored snapshot."""
        self.positions = dict(snap.positions)
        self.session_state = dict(snap.session_state)
        self._saved_session = dumps(self.session_state)

    def saved_now(self) -> None:
        """The snapshot as of now is stored already (committed with the run's start)."""
        self._last = time.monotonic()

    def save(self, fold: ThreadFold, seq: int, *, force: bool) -> None:
        """Save the snapshot as of ``seq`` with the events, unless the throttle says to
        wait (``force`` overrides it)."""
        self.pending = None
        if not force:
            if self.settings.snapshot_mode == "run_end":
                return
            if time.monotonic() - self._last < self.settings.snapshot_min_interval:
                return  # changes keep accumulating in the fold until the next save
        self._last = time.monotonic()
        self.writer.snapshot(self.channel, self.write(fold, seq))
        self.announce(fold, seq)

    def announce(self, fold: ThreadFold, seq: int) -> None:
        """Tell the host's snapshot hook, if any, of the snapshot as of ``seq`` once it
        is committed (G2)."""
        if self.settings.snapshot_hook is None:
            return
        payload = {
            "threadId": self.thread_id, "runId": self.run_id, "asOf": seq,
            "messages": copy.deepcopy(fold.messages),
            "state": copy.deepcopy(fold.state),
        }
        self.writer.after_commit(self.channel, seq, lambda: self.on_snapshot(payload))

    def write(self, fold: ThreadFold, seq: int) -> SnapshotWrite:
        """The fold's changes since the last save, serialized (the save's own work)."""
        changes = fold.take_changes()
        messages = fold.messages
        upserts: list[tuple[str, float, str]] = []
        for mid in changes.removed_ids:
            self.positions.pop(mid, None)
        if changes.reordered:
            # Rare (an inserted message): renumber, which rewrites every position.
            self.positions = {m["id"]: float(i + 1) for i, m in enumerate(messages)}
            upserts = [(m["id"], self.positions[m["id"]], dumps(m)) for m in messages]
        else:
            for index, message in changes.upserts:  # in the order of the messages
                mid = message["id"]
                pos = self.positions.get(mid)
                if pos is None:
                    before = self.positions.get(messages[index - 1]["id"], 0.0) if index else 0.0
                    after = (self.positions.get(messages[index + 1]["id"])
                             if index + 1 < len(messages) else None)
                    pos = before + 1.0 if after is None else (before + after) / 2
                    self.positions[mid] = pos
                upserts.append((mid, pos, dumps(message)))
        # An agent edits its session state in place: only its encoding tells a change.
        session = dumps(self.session_state) if self.session_state or \
            self._saved_session != "{}" else "{}"
        session_json = None if session == self._saved_session else session
        self._saved_session = session
        return SnapshotWrite(
            as_of_run=self.run_id, as_of_seq=seq, upserts=upserts,
            deletes=list(changes.removed_ids),
            state_json=dumps(fold.state) if changes.state_changed else None,
            session_state_json=session_json,
        )


async def fold_log(store: Store, rid: int, fold: ThreadFold, after: int) -> None:
    """Fold a run's logged events after ``after`` onto ``fold`` (a resumed attempt:
    what the dead one committed past the snapshot); the constructs they opened are
    indexed already."""
    while True:
        page = await store.read_events(rid, after, 1000)
        if not page:
            break
        for ev in page:
            fold.apply(json.loads(ev.body))
        after = page[-1].seq
    fold.construct_changes = []
