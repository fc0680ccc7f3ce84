"""AG-UI 1.0 capability discovery: ``GET /agents`` says, in the protocol's own
``AgentCapabilities`` shape, that outlast's streams are resumable, and how; a client
that follows what it says resumes a run it was cut off from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import AgentCapabilities

from tests.support.inprocess import InProcess, in_process_server
from tests.support.runs import stored_log, uid
from tests.support.server import collect, demo_input


@pytest.fixture
async def served(tmp_path: Path) -> Any:
    async with in_process_server(tmp_path) as s:
        yield s


async def test_agents_declare_resumable_streams_and_how_to_resume(served: InProcess) -> None:
    [demo] = (await served.client.get("/agents")).json()["agents"]
    caps = AgentCapabilities.model_validate(demo["capabilities"])
    assert caps.transport is not None and caps.transport.resumable is True
    assert caps.transport.streaming is True
    assert caps.transport.push_notifications is None  # no webhook is configured
    assert caps.human_in_the_loop is not None and caps.human_in_the_loop.interrupts is True
    resume = demo["capabilities"]["custom"]["outlast"]["resume"]
    assert resume["crashResume"] is demo["supportsResume"] is True

    # Follow the declaration: cut the stream, then resume from the last id seen.
    run = uid("r")
    method, path = resume["events"].split(" ")
    _, first = await collect(served.client, "POST", "/agents/demo", limit=6,
                             json=demo_input(uid("t"), run, steps=2))
    last = max(f.id for f in first if f.id is not None)
    _, rest = await collect(served.client, method, path.replace("{runId}", run),
                            headers={resume["cursor"]: str(last)})
    seen = [(f.id, f.event) for f in first + rest if f.id is not None]
    stored = [(f.id, f.event) for f in await stored_log(served.client, run)]
    assert seen == stored
    assert stored[-1][1]["type"] == "RUN_FINISHED"


async def test_webhooks_are_declared_as_push_notifications(tmp_path: Path) -> None:
    async with in_process_server(tmp_path, webhook_allow=["http://127.0.0.1:9/hooks/"],
                                 webhook_secret="s3cret-signing-key") as s:
        [demo] = (await s.client.get("/agents")).json()["agents"]
    assert demo["capabilities"]["transport"]["pushNotifications"] is True
