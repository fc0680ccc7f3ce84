"""A caller cancelled mid-transaction (a subscriber that disconnects while its
read waits in the connection's queue) must hand its connection back clean."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from outlast.store.sqlite import SQLiteStore


async def test_cancelled_reads_and_writes_leave_every_connection_usable(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "outlast.db", readers=1)
    await store.open()
    rng = random.Random(7)
    failures: list[BaseException] = []
    try:
        for _ in range(300):
            tasks = [asyncio.create_task(store.list_threads("owner", None, 10, None))
                     for _ in range(3)]
            tasks.append(asyncio.create_task(store.prune(0.0)))
            for _ in range(rng.randrange(5)):
                await asyncio.sleep(0)
            for task in tasks:
                if rng.random() < 0.5:
                    task.cancel()
            for result in await asyncio.gather(*tasks, return_exceptions=True):
                if isinstance(result, BaseException) and \
                        not isinstance(result, asyncio.CancelledError):
                    failures.append(result)
        assert failures == []
        # Both the writer and the reader still work afterwards.
        await store.prune(0.0)
        assert (await store.list_threads("owner", None, 10, None)).threads == []
    finally:
        await store.close()
