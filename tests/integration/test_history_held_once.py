"""G10: a running run holds the history its client resent once, however long it runs.

AG-UI front ends resend the whole conversation with every run, and a run may stream for
twenty minutes. The request's bytes, its parse, the validated model, the run's stored
input, its echo in ``RUN_STARTED`` and the thread's snapshot are all copies of that
history; once the run is admitted and its agent started, only the fold's copy (the
conversation the run extends) may stay, and the agent's view of its input shares it.
Checked in the serving process itself: every live string carrying the history is found
and counted while a watching stream and a reattached one are open.
"""

from __future__ import annotations

import asyncio
import gc
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from outlast.http.streams import RunStream
from tests.support.inprocess import in_process_server
from tests.support.runs import run_record, uid
from tests.support.server import demo_input, wait_for

HISTORY = 24


def history_body(thread_id: str, run_id: str, mark: str) -> bytes:
    """The request, built here so that the test itself holds it only as bytes."""
    messages = [{"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant",
                 "content": f"{mark}:{i}:" + "resent history " * 100} for i in range(HISTORY)]
    messages.append({"id": f"user-{run_id}", "role": "user", "content": "go on"})
    # A long first step: the run sits in it, running, while the test looks.
    body = demo_input(thread_id, run_id, messages=messages, steps=2, step_delay_ms=60_000)
    return json.dumps(body).encode()


def texts_carrying(mark: str) -> list[str]:
    """Every live string of the process that carries ``mark``, once each."""
    gc.collect()
    found: dict[int, str] = {}
    todo = gc.get_referents(*gc.get_objects())
    while todo:
        obj = todo.pop()
        if type(obj) is str:
            if mark in obj and len(obj) > len(mark):
                found[id(obj)] = obj
        elif type(obj) in (dict, tuple) and not gc.is_tracked(obj):
            # The collector does not track a dict or tuple of strings only: read it here.
            todo.extend(gc.get_referents(obj))
    return list(found.values())


async def read_until(chunks: AsyncIterator[bytes], needle: bytes) -> None:
    """Read a stream until ``needle`` went by, keeping none of what was read. The caller
    holds ``chunks`` meanwhile: an iterator let go closes its response."""
    tail = b""
    async for chunk in chunks:
        if needle in tail + chunk:
            return
        tail = chunk[-len(needle):]
    raise AssertionError(f"the stream ended before {needle!r}")


async def test_a_running_watched_run_holds_its_resent_history_once(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    t, r = uid("t"), uid("r")
    async with in_process_server(tmp_path) as served:
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        async with served.client.stream("POST", "/agents/demo", headers=headers,
                                        content=history_body(t, r, mark)) as watched:
            assert watched.status_code == 200
            watching = watched.aiter_raw()
            await read_until(watching, b'"TOOL_CALL_START"')

            async def still() -> bool:
                return (await run_record(served.client, r))["status"] == "running"
            await wait_for(still)
            last = (await run_record(served.client, r))["lastSeq"]
            async with served.client.stream("GET", f"/runs/{r}/events",
                                            params={"after": last - 1}) as again:
                assert again.status_code == 200
                following = again.aiter_raw()
                await read_until(following, b"data:")
                await asyncio.sleep(0.2)  # both streams now wait on the run's feed

                texts = texts_carrying(mark)
                contents = [f"{mark}:{i}:" + "resent history " * 100 for i in range(HISTORY)]
                # One string per message (the fold's, shared by the agent's input), and
                # no JSON text of the whole input left anywhere: not the request's, not
                # the stored record's, not RUN_STARTED's.
                assert sorted(texts) == sorted(contents), (
                    f"{len(texts)} strings carry the history, "
                    f"{sum(len(x) > 3000 for x in texts)} of them whole JSON texts")
                streams = sum(isinstance(o, RunStream) for o in gc.get_objects())
                assert streams == 2, "both streams are still being served"
        await served.client.post(f"/runs/{r}/cancel")
