"""Durable webhooks over SQL (G12): the outbox rows and their delivery leases."""

from __future__ import annotations

import time
from contextlib import AbstractAsyncContextManager

from outlast.store.base import WebhookRecord
from outlast.store.sqlconn import Conn


class WebhooksSql:
    """``Store``'s webhook methods, written once for every SQL dialect (a base of
    ``SqlStore``)."""

    def _write(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError  # SqlStore's backends provide it

    def _read(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    async def webhook_claim(self, instance: str, lease_until: float,
                            limit: int) -> list[WebhookRecord]:
        async with self._write() as c:
            rows = await c.all("webhook_claim", instance=instance, now=time.time(),
                               lease_until=lease_until, limit=limit)
        return sorted((WebhookRecord.from_row(r) for r in rows), key=lambda h: h.wid)

    async def webhook_settle(self, wid: int, instance: str, attempt: int, *, status: str,
                             next_at: float, last_status: int | None,
                             last_error: str | None) -> bool:
        async with self._write() as c:
            changed = await c.run(
                "webhook_settle", wid=wid, instance=instance, attempt=attempt, status=status,
                next_at=next_at, last_status=last_status, last_error=last_error,
                delivered_at=time.time() if status == "delivered" else None)
        return changed == 1

    async def webhook_release(self, instance: str, *, others: bool = False) -> None:
        async with self._write() as c:
            await c.run("webhook_release", instance=instance, now=time.time(),
                        others=1 if others else 0)

    async def webhook_outlook(self) -> tuple[float | None, int]:
        async with self._read() as c:
            row = await c.one("webhook_outlook")
        if row is None:
            return None, 0
        return (None if row["next_at"] is None else float(row["next_at"]),
                int(row["backlog"] or 0))

    async def webhooks_for_run(self, rid: int) -> list[WebhookRecord]:
        async with self._read() as c:
            rows = await c.all("webhooks_for_run", rid=rid)
        return [WebhookRecord.from_row(r) for r in rows]
