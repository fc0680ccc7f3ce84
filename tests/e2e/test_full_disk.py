"""A full disk is a condition the service knows. The store's data directory sits on a
real 24 MB filesystem (a tmpfs the test mounts: root only, as in CI) that the test fills
while a run streams to a live client:

- writes that cannot be stored are refused with 503, ``Retry-After`` and a typed code
  (``storage_full``), nothing half-stored, no request dying unhandled; ``/readyz`` says
  not ready, and ready again by itself;
- the streaming run keeps its lease and its unwritten events, and continues by itself
  once space returns, without a takeover, its stream whole and in order;
- a run that waits longer than ``--storage-wait`` ends ``failed`` with
  ``RUN_ERROR storage_full`` at the end of its live clients' streams;
- the log says it once per episode, with no traceback.

On SQLite, and on PostgreSQL with the cluster's data directory on the small
filesystem (its write-ahead log elsewhere, as operators keep it)."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.runs import run_record, stream_into, wait_final
from tests.support.server import Frame, ServerProcess, demo_input, wait_for
from tests.support.small_disk import fill, mounted

pytestmark = pytest.mark.slow

# A run long enough to be mid-stream when the disk fills, with events big enough that
# its commits need new space (a few-byte commit may still fit in the log's own).
LONG = {"steps": 6, "step_delay_ms": 300, "tokens_per_message": 150, "token_delay_ms": 3}
BIG = "x" * 150_000  # an input whose admission needs room


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with mounted(tmp_path / "small") as disk:
        yield disk


async def outage_seen(c: httpx.AsyncClient) -> httpx.Response:
    async def refused() -> httpx.Response | None:
        r = await c.get("/readyz")
        return r if r.status_code == 503 else None

    response: httpx.Response = await wait_for(refused, timeout=30)
    return response


async def admissions_during(c: httpx.AsyncClient, tag: str) -> dict[str, int]:
    """Admissions of new runs, each with a big input, until one is refused; each run id
    and the status it got (an admission that fits in the space left is stored whole)."""
    seen: dict[str, int] = {}
    for i in range(40):
        run_id = f"{tag}-new{i}"
        body = demo_input(f"{tag}-t{i}", run_id, BIG, steps=1, step_delay_ms=0)
        async with c.stream("POST", "/agents/demo", json=body) as r:
            seen[run_id] = r.status_code
            if r.status_code == 503:
                await r.aread()
                problem = r.json()["error"]
                assert problem["code"] == "storage_full", problem
                assert "full" in problem["message"]
                assert int(r.headers["retry-after"]) > 0
                return seen
    raise AssertionError(f"no admission was refused on a full disk: {seen}")


async def follow(c: httpx.AsyncClient, body: dict[str, Any]
                 ) -> tuple[list[Frame], asyncio.Task[httpx.Response]]:
    frames: list[Frame] = []
    task = asyncio.create_task(stream_into(c, "POST", "/agents/demo", frames, json=body))

    async def streaming() -> bool:
        return len(frames) > 30

    await wait_for(streaming)
    return frames, task


def contiguous(frames: list[Frame]) -> list[int]:
    seqs = [f.id for f in frames if f.id is not None]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "a gap or a repeat"
    return seqs


def said_once(srv: ServerProcess) -> None:
    """One line when the outage began, one when it ended, and no traceback."""
    began = [line for line in srv.log if "cannot write" in line and "ERROR" in line]
    ended = [line for line in srv.log if "writes again after" in line]
    assert len(began) == 1, began
    assert len(ended) == 1, ended
    assert "full" in began[0]
    assert not any("Traceback" in line for line in srv.log), "\n".join(srv.log)


async def check_outage(srv: ServerProcess, disk: Path, tag: str, *,
                       wait: float) -> tuple[list[Frame], dict[str, int]]:
    """Fill the disk under a streaming run, try new work, wait, free the space; the
    live stream (read to its end) and the admissions tried."""
    async with srv.client() as c:
        frames, live = await follow(c, demo_input(tag, f"{tag}-r1", **LONG))
        filler = fill(disk)
        refused = await outage_seen(c)
        assert refused.json()["error"]["code"] == "storage_full"
        assert int(refused.headers["retry-after"]) > 0
        tried = await admissions_during(c, tag)
        # Reads go on: the run and its stored events are there to see.
        assert (await c.get(f"/runs/{tag}-r1")).status_code == 200
        await asyncio.sleep(wait)  # longer than the lease: no takeover follows
        filler.unlink()

        async def ready() -> bool:
            return (await c.get("/readyz")).status_code == 200

        await wait_for(ready, timeout=30)
        await asyncio.wait_for(live, 60)
        return frames, tried


async def test_sqlite_a_full_disk_refuses_new_work_and_the_run_continues(
        server_factory: Any, small_disk: Path, tmp_path: Path) -> None:
    srv: ServerProcess = server_factory(
        "--lease-ttl", "1", "--demo-workspace", str(tmp_path / "ws"),
        data_dir=small_disk / "data")
    frames, tried = await check_outage(srv, small_disk, "sq", wait=2.5)
    assert frames[-1].event["type"] == "RUN_FINISHED", frames[-1]
    contiguous(frames)
    async with srv.client() as c:
        record = await run_record(c, "sq-r1")
        assert record["status"] == "succeeded" and record["attempts"] == 1, record
        for run_id, status in tried.items():  # stored whole, or not at all
            found = await c.get(f"/runs/{run_id}")
            if status == 503:
                assert found.status_code == 404, found.text
            else:
                assert (await wait_final(c, run_id))["status"] == "succeeded"
    said_once(srv)
    srv.stop()
    db = sqlite3.connect(small_disk / "data" / "outlast.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()


async def test_sqlite_a_run_that_waits_too_long_ends_failed_with_storage_full(
        server_factory: Any, small_disk: Path, tmp_path: Path) -> None:
    srv: ServerProcess = server_factory(
        "--storage-wait", "1", "--demo-workspace", str(tmp_path / "ws"),
        data_dir=small_disk / "data")
    frames, _ = await check_outage(srv, small_disk, "sw", wait=2.0)
    last = frames[-1].event
    assert last["type"] == "RUN_ERROR" and last["code"] == "storage_full", last
    contiguous(frames)
    async with srv.client() as c:
        record = await run_record(c, "sw-r1")
    assert record["status"] == "failed", record
    assert record["error"]["code"] == "storage_full"
    said_once(srv)


@pytest.mark.postgres
async def test_postgres_a_full_data_directory_refuses_new_work_and_the_run_continues(
        server_factory: Any, tmp_path: Path) -> None:
    from tests.support.postgres import PostgresCluster, postgres_owner

    # Where the server's own user can reach it (pytest's directories are the test's).
    base = Path(tempfile.mkdtemp(prefix="outlast-full-"))
    base.chmod(0o755)
    with mounted(base / "disk", size_mb=64, owner=postgres_owner()) as disk:
        cluster = PostgresCluster.start_new(data_dir=disk / "data")
        try:
            url = cluster.fresh_database("full")
            srv: ServerProcess = server_factory(
                "--store", url, "--lease-ttl", "1",
                "--demo-workspace", str(tmp_path / "ws"))
            frames, tried = await check_outage(srv, disk, "pg", wait=2.5)
            assert frames[-1].event["type"] == "RUN_FINISHED", frames[-1]
            contiguous(frames)
            async with srv.client() as c:
                record = await run_record(c, "pg-r1")
                assert record["status"] == "succeeded" and record["attempts"] == 1, record
                for run_id, status in tried.items():
                    found = await c.get(f"/runs/{run_id}")
                    assert (found.status_code == 404) == (status == 503), (run_id, found.text)
            said_once(srv)
            srv.stop()
        finally:
            cluster.stop()
    shutil.rmtree(base, ignore_errors=True)
