"""A caller cancelled mid-transaction (a subscriber that disconnects while its
read waits in the connection's queue) must hand its connection back clean."""

from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path

from outlast.store.base import AdmitRequest
from outlast.store.sqlite import SQLiteStore


def admission(run: str) -> AdmitRequest:
    payload = {"threadId": run, "runId": run,
               "messages": [{"id": f"u-{run}", "role": "user", "content": "go"}]}
    return AdmitRequest(
        principal="alice", thread_id=run, run_id=run, agent="demo", key=run, fingerprint=run,
        input_json=json.dumps(payload), options_json="{}", multitask="reject", resume=[],
        has_new_input=True, title=None, now=time.time(), claim_instance="me",
        claim_ttl=30.0, claim_limit=1, claim_start=True)


async def test_cancelled_reads_and_writes_leave_every_connection_usable(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "outlast.db", readers=1)
    await store.open()
    rng = random.Random(7)
    failures: list[BaseException] = []
    try:
        for round_ in range(300):
            tasks = [asyncio.create_task(store.list_threads("alice", None, 10, None))
                     for _ in range(3)]
            tasks.append(asyncio.create_task(store.prune(0.0)))
            # Admissions wait for the writer in a group: a caller gone leaves the rest.
            tasks += [asyncio.create_task(store.admit(admission(f"t{round_}-{i}")))
                      for i in range(3)]
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
        # Both the writer and the reader still work afterwards, and every admission
        # either committed whole (its run started) or left nothing.
        await store.prune(0.0)
        threads = (await store.list_threads("alice", None, 1000, None)).threads
        assert threads
        for thread in threads:
            run = await store.get_run("alice", thread.id)
            assert run is not None and run.last_seq == 1
    finally:
        await store.close()
