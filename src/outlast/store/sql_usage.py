"""The usage ledger over SQL: what a run, a thread or a principal spent in tokens.

Rows are written with a run's events (``sqlwrite.write_batch``); these are the reads.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from outlast.store.base import UsageRecord
from outlast.store.sqlconn import Conn


class UsageSql:
    """``Store``'s usage reads, written once for every SQL dialect (a base of
    ``SqlStore``)."""

    def _read(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError  # SqlStore's backends provide it

    async def usage_for_run(self, rid: int) -> list[UsageRecord]:
        async with self._read() as c:
            rows = await c.all("usage_for_run", rid=rid)
        return [UsageRecord.from_row(r) for r in rows]

    async def usage_summary(self, principal: str, since: float, until: float, *,
                            threads: int = 100) -> tuple[list[UsageRecord], list[UsageRecord]]:
        async with self._read() as c:
            models = await c.all("usage_by_model", principal=principal, since=since, until=until)
            by_thread = await c.all("usage_by_thread", principal=principal, since=since,
                                    until=until, limit=threads)
        return ([UsageRecord.from_row(r) for r in models],
                [UsageRecord.from_row(r, key=r["thread_id"]) for r in by_thread])

    async def usage_total(self, principal: str, since: float, *, but: int = 0) -> int:
        async with self._read() as c:
            row = await c.one("usage_total_since", principal=principal, since=since, rid=but)
        return 0 if row is None else int(row["total"] or 0)
