"""What a commit of one event per run costs, by the layout of the log (SQLite).

At a model's pace each commit carries one event from each of N runs. The log today
(``bench.floor.SCHEMA``, the events table's shape since schema 7) is a rowid table, in
append order, with the ``(rid, seq)`` key as an index beside it: every run's newest
entry lands on that run's own leaf of the key, so a commit writes a 4 KB page per run
into the WAL (and later checkpoints and syncs it), however small its events are. This
bench measures that against two other layouts on the same load, in one thread of this
process, on real SQLite files in WAL mode with the server's ``synchronous=FULL``:

- ``indexed``: the events table as it is, each run with ``--history`` events already;
- ``append``: the same table with no key at all (what a commit costs when it writes
  only its own rows: the least any layout can do);
- ``deferred``: the append-only table plus the key kept in a table of its own,
  ``(rid, seq) -> rowid``, brought up to date every ``--catch-up`` commits in that
  commit's transaction (readers would read the key, then the few rows past it in append
  order). Each run's leaf is then written once per catch-up instead of once per commit.

Layouts alternate round by round; per commit: the thread's CPU (``time.thread_time``,
user and system, the kernel's WAL writes and ``fsync`` included), wall time, and bytes
handed to ``write`` (``/proc/self/io``). CPU per event is CPU per commit over N.

    python -m bench.log_layout [--quick] [--runs 200] [--history 2000] [--catch-up 50]
"""

from __future__ import annotations

import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import parser, report
from bench.floor import SCHEMA
from outlast.store.sqlite import SQLiteStore

BODY = ('{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg_r-0123456789_12",'
        '"delta":"@1765030000.123456+123","timestamp":1765030000000}')
APPEND = "CREATE TABLE events (rid INTEGER NOT NULL, seq INTEGER NOT NULL, " \
         "boundary INTEGER NOT NULL DEFAULT 0, body TEXT NOT NULL);"
KEY = "CREATE TABLE events_key (rid INTEGER NOT NULL, seq INTEGER NOT NULL, " \
      "at INTEGER NOT NULL, PRIMARY KEY (rid, seq)) WITHOUT ROWID;"
CATCH_UP = "INSERT INTO events_key (rid, seq, at) SELECT rid, seq, rowid FROM events " \
           "WHERE rowid > ? ORDER BY rid, seq"
LAYOUTS = ("indexed", "append", "deferred")


def written() -> int:
    """Bytes this process has handed to write calls."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("wchar:"))


class Log:
    """One layout's file, its runs' history written and checkpointed."""

    def __init__(self, root: Path, layout: str, runs: int, history: int,
                 catch_up: int) -> None:
        self.layout, self.runs, self.catch_up = layout, runs, catch_up
        self.db = sqlite3.connect(root / f"{layout}.sqlite", isolation_level=None)
        for pragma in SQLiteStore(root / "x", synchronous="FULL")._pragmas():
            self.db.execute(pragma)
        self.db.executescript(SCHEMA if layout == "indexed" else
                              APPEND + (KEY if layout == "deferred" else ""))
        self.db.execute("BEGIN")
        self.db.executemany("INSERT INTO events (rid, seq, boundary, body) VALUES (?, ?, 0, ?)",
                            ((r, s, BODY) for s in range(1, history + 1)
                             for r in range(runs)))
        self.keyed = 0
        if layout == "deferred":
            self.db.execute(CATCH_UP, (0,))
            self.keyed = self.db.execute("SELECT MAX(rowid) FROM events").fetchone()[0]
        self.db.execute("COMMIT")
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.seq, self.commits = history, 0
        self.sql = "INSERT INTO events (rid, seq, boundary, body) VALUES " + \
            ", ".join(["(?, ?, 0, ?)"] * runs)

    def commit(self) -> None:
        self.seq += 1
        self.commits += 1
        args: list[Any] = []
        for r in range(self.runs):
            args += (r, self.seq, BODY)
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        db.execute(self.sql, args)
        if self.layout == "deferred" and self.commits % self.catch_up == 0:
            db.execute(CATCH_UP, (self.keyed,))
            self.keyed = db.execute("SELECT MAX(rowid) FROM events").fetchone()[0]
        db.execute("COMMIT")


def measure(log: Log, commits: int) -> dict[str, float]:
    cpu, wall, wrote = time.thread_time(), time.perf_counter(), written()
    for _ in range(commits):
        log.commit()
    cpu, wall, wrote = time.thread_time() - cpu, time.perf_counter() - wall, written() - wrote
    return {"cpu_us_per_event": cpu / commits / log.runs * 1e6,
            "wall_ms_per_commit": wall / commits * 1e3,
            "kb_per_commit": wrote / commits / 1024}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--runs", type=int, default=200, help="runs in each commit (N)")
    p.add_argument("--history", type=int, default=2000, help="events each run has already")
    p.add_argument("--catch-up", type=int, default=50,
                   help="deferred: commits between two catch-ups of the key")
    p.add_argument("--rounds", type=int, help="rounds of every layout (default 5; quick 2)")
    ns = p.parse_args()
    rounds = ns.rounds or (2 if ns.quick else 5)
    history = 200 if ns.quick else ns.history
    commits = ns.catch_up * (2 if ns.quick else 4)  # whole catch-up cycles
    results: dict[str, list[dict[str, float]]] = {k: [] for k in LAYOUTS}
    with tempfile.TemporaryDirectory(prefix="outlast-layout-") as tmp:
        logs = {k: Log(Path(tmp), k, ns.runs, history, ns.catch_up) for k in LAYOUTS}
        for i in range(rounds):
            for k in (LAYOUTS if i % 2 == 0 else LAYOUTS[::-1]):
                results[k].append(measure(logs[k], commits))
        for log in logs.values():
            log.db.close()
    rows: list[tuple[str, ...]] = [("layout", "CPU µs/event", "ms/commit", "KB written/commit",
                                    "CPU vs indexed")]
    base = statistics.median(r["cpu_us_per_event"] for r in results["indexed"])
    for k in LAYOUTS:
        cpu = [r["cpu_us_per_event"] for r in results[k]]
        rows.append((k, f"{statistics.median(cpu):.1f} ({min(cpu):.1f}-{max(cpu):.1f})",
                     f"{statistics.median(r['wall_ms_per_commit'] for r in results[k]):.2f}",
                     f"{statistics.median(r['kb_per_commit'] for r in results[k]):.0f}",
                     f"{statistics.median(cpu) / base:.2f}"))
    report(f"a commit of one event for each of {ns.runs} runs, {history:,} events each "
           f"already, by the log's layout ({rounds} rounds of {commits} commits, medians)",
           {"runs": ns.runs, "history": history, "catch_up": ns.catch_up, "commits": commits,
            "rounds": results}, rows, ns.json)


if __name__ == "__main__":
    main()
