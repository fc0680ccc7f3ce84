"""Retention over SQL (spec §6): compact final runs' logs in short batches."""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager

from outlast.store.base import Freed
from outlast.store.sqlconn import Conn


class RetentionSql:
    """``Store``'s retention methods, written once for every SQL dialect (a base of
    ``SqlStore``)."""

    def _write(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError  # SqlStore's backends provide it

    def _read(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    async def compact(self, before: float, now: float, max_runs: int,
                      max_events: int) -> Freed | None:
        async with self._write() as c:
            # A long log being removed over several batches goes first: it is already
            # answered 410, and what remains of it is garbage.
            pending = await c.one("compacting_next")
            if pending is not None:
                return await self._sweep(c, pending["rid"], max_events)
            rows = await c.all("runs_compactable", cutoff=before, limit=max_runs)
            if not rows:
                return None
            if rows[0]["last_seq"] > max_events:
                # Marked now, so no reader gets part of it; the rest in later batches.
                rid = rows[0]["rid"]
                await c.run("runs_mark_compacted", rids=json.dumps([rid]), now=now)
                await c.run("compacting_insert", rid=rid)
                return Freed(runs=1) + await self._sweep(c, rid, max_events)
            rids: list[int] = []
            total = 0
            for row in rows:
                if total + row["last_seq"] > max_events:
                    break
                rids.append(row["rid"])
                total += row["last_seq"]
            chosen = json.dumps(rids)
            size = await c.one("events_measure_runs", rids=chosen)
            await c.run("events_delete_runs", rids=chosen)
            await c.run("constructs_delete_runs", rids=chosen)
            await c.run("run_states_delete_runs", rids=chosen)
            await c.run("runs_mark_compacted", rids=chosen, now=now)
        assert size is not None
        return Freed(len(rids), int(size["events"]), int(size["bytes"]))

    async def _sweep(self, c: Conn, rid: int, max_events: int) -> Freed:
        """Remove the next ``max_events`` events of a compacted run's log."""
        first = await c.one("events_first_seq", rid=rid)
        if first is None or first["seq"] is None:
            await c.run("compacting_delete", rid=rid)
            return Freed()
        upto = int(first["seq"]) + max_events - 1
        size = await c.one("events_measure_upto", rid=rid, upto=upto)
        await c.run("events_delete_upto", rid=rid, upto=upto)
        # The construct index of those events goes with them (it only serves streams).
        await c.run("constructs_delete_upto", rid=rid, upto=upto)
        await c.run("run_states_delete_upto", rid=rid, upto=upto)
        assert size is not None
        return Freed(0, int(size["events"]), int(size["bytes"]))

    async def compactable(self, before: float) -> Freed:
        async with self._read() as c:
            rows = await c.all("retention_preview", cutoff=before)
        return Freed(sum(int(r["runs"]) for r in rows), sum(int(r["events"]) for r in rows),
                     sum(int(r["bytes"]) for r in rows))

    async def reclaim(self) -> None:
        # Deleted rows leave free space the next inserts reuse; a backend that can
        # also hand it back to the file system does so here (SQLite).
        return None

