"""The group commit's fence on SQLite without a lease lookup per run while the leases
are known to be held (G2, G8).

A commit fences every run it writes: its attempt must hold the run's lease and its view
of ``last_seq`` be current (``runs_fence_append``). On SQLite the lease lives in the
runs rows and ``last_seq`` in run_seqs, so the lease check is a second lookup per run.
But one process owns the file (the data-directory lock), and a lease changes only by a
transaction of this process: a claim, a release, an expiry, a cancel, a run's end. So
once a commit has found a run's lease held by an attempt, it stays held until one of
those runs, and the next commits need only check ``last_seq`` (``run_seqs_append``).

``KnownLeases`` is that knowledge, kept by the write connection's thread, under the
write lock. It is forgotten whole at the start of every write transaction that is not a
group commit (any of which may change a lease), and whenever another connection has
committed since the last transaction (``PRAGMA data_version``: the lease thread's
renewals, the aiosqlite writer's transactions, any other process that opens the file);
a group commit itself ends leases only by a run's end, which it forgets. A run whose
lease this process may have lost is therefore always fenced by the lease check, in the
same transaction as its append: the lease thread's renewals do not change who holds a
lease, and a lease that ran out here unrenewed (``engine.leases``) is taken over only by
a claim, which forgets everything first.
"""

from __future__ import annotations

import sqlite3


class KnownLeases:
    """The (rid, instance, attempt) whose lease a commit found held, as of the last
    transaction on the write connection."""

    __slots__ = ("_version", "held")

    def __init__(self) -> None:
        self.held: set[tuple[int, str, int]] = set()
        self._version: int | None = None

    def begin(self, db: sqlite3.Connection, group_commit: bool) -> None:
        """At the start of a write transaction on ``db``, after ``BEGIN IMMEDIATE`` (no
        other connection commits until it ends): forget what may no longer hold."""
        version = db.execute("PRAGMA data_version").fetchone()[0]
        if not group_commit or version != self._version:
            self.held.clear()
        self._version = version

    def forget(self) -> None:
        """A write transaction that is not a group commit (admissions)."""
        self.held.clear()
