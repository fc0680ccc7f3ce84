"""The bench server: outlast's own app plus baseline routes, on one uvicorn server.

The baselines run on the very same stack as the durable routes (uvicorn, FastAPI,
the SSE response of ``outlast.http.sse``, the same JSON and frame encoding), minus
the store:

- ``POST /bench/agents/bench`` runs the bench agent and streams its events as they
  are emitted, with no log, no fold, no snapshots: a server without durability.
  ``POST /bench/agents/paced`` does the same for the paced agent (``bench.latency``,
  ``bench.model_pace``).
- ``POST /bench/floor/{bench|paced}`` adds to that what every durable server must do
  per event (``bench.floor``): the floor ``bench.cpu_per_event --floor`` measures.
- ``POST /bench/floor-guarded/{bench|paced}`` adds to the floor what outlast's
  guarantees need of each event (``bench.floor_guarded``: G11's checks, the fold,
  boundary snapshots, the construct index), without outlast's machinery.
- ``GET /bench/runs/{run_id}/events?after=N`` streams a finished run's frames,
  encoded once ahead of time and held in memory: replay without reading the log.
- ``PUT /bench/validation/{on|off}`` turns G11's checks of what agents emit off and on
  again for the durable routes, so ``bench.validation`` can price them in one process.

``python -m bench.server --data-dir DIR`` prints ``outlast serving on URL`` when ready.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI, Query, Request

from bench.agents import BenchAgent, PacedAgent
from bench.floor import add_floor, stream_frames
from bench.floor_guarded import add_floor_guarded
from outlast.agent import Agent
from outlast.agents.demo import DemoAgent
from outlast.cli.serve import tune_interpreter
from outlast.config import Settings
from outlast.engine import execution
from outlast.engine.runtime import Engine
from outlast.http.app import create_app
from outlast.http.auth import LOCAL_PRINCIPAL
from outlast.http.frames import frame, retry_preamble
from outlast.http.request_limits import read_json
from outlast.http.request_models import parse_input
from outlast.http.sse import EventStream
from outlast.http.streams import FIRST_PAGE, PAGE
from outlast.protocol.events import now_ms
from outlast.protocol.jsonutil import dumps
from outlast.store import open_store
from outlast.tracing import TRACING


class BaselineContext:
    """Just enough of a RunContext for the bench agent: ``emit`` encodes the event
    the way the durable path does (timestamp, compact JSON, SSE frame) and hands it
    straight to the response."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.run_id = body["runId"]
        self.thread_id = body["threadId"]
        self.forwarded_props = body.get("forwardedProps")
        self.messages = body.get("messages") or []
        self.pending: list[str] = []
        self.seq = 0
        self.done = False
        self.wake = asyncio.Event()

    def finished(self) -> bool:
        return self.done

    async def emit(self, event: dict[str, Any]) -> None:
        self.push(dict(event))

    def push(self, data: dict[str, Any]) -> None:
        if "timestamp" not in data:
            data["timestamp"] = now_ms()
        body = dumps(data)
        self.seq += 1
        self.pending.append(frame(self.seq, body))
        self.wake.set()


def _unchecked(*_: Any) -> None:
    """Accept any event: the durable path with G11's checks left out (bench only)."""


def _unchecked_delta(event: dict[str, Any]) -> tuple[str, Any] | None:
    """The one-pass delta path's construct key without its schema check (bench only)."""
    lane = _DELTA_LANES.get(event.get("type"))
    return None if lane is None else (lane[0], event.get(lane[1]))


_DELTA_LANES = {"TEXT_MESSAGE_CONTENT": ("text", "messageId"),
                "TOOL_CALL_ARGS": ("tool", "toolCallId"),
                "REASONING_MESSAGE_CONTENT": ("reasoning_message", "messageId")}
CHECKS = {"on": (execution.check_schema, execution.check_order, execution.delta_key),
          "off": (_unchecked, _unchecked, _unchecked_delta)}


def add_baselines(app: FastAPI, engine: Engine, agent: BenchAgent,
                  paced: PacedAgent | None = None) -> None:
    """The no-store twins of ``POST /agents/bench`` (and ``/agents/paced``) and
    ``GET /runs/{id}/events``."""
    encoded: dict[str, list[str]] = {}
    baselines: dict[str, Agent] = {"bench": agent}
    if paced is not None:
        baselines["paced"] = paced

    @app.post("/bench/agents/{name}", response_model=None)
    async def stream_baseline(name: str, request: Request) -> EventStream:
        s = engine.settings
        body = parse_input(await read_json(request, s.max_body_bytes, s.body_timeout), s)
        return EventStream(stream_frames(baselines[name], BaselineContext(body)),
                           headers={"Outlast-Run-Id": body["runId"],
                                    "Outlast-Thread-Id": body["threadId"]},
                           keepalive_seconds=s.keepalive)

    @app.put("/bench/validation/{state}")
    async def validation(state: str) -> dict[str, str]:
        # The execution module looks the checks up at every emit (a content delta's
        # schema check is in delta_key, its one-pass path).
        (execution.check_schema, execution.check_order,  # type: ignore[assignment]
         execution.delta_key) = CHECKS[state]
        return {"validation": state}

    @app.get("/bench/runs/{run_id}/events", response_model=None)
    async def replay_baseline(run_id: str, after: int = Query(default=0)) -> EventStream:
        frames = encoded.get(run_id)
        if frames is None:  # encode once, outside any measurement (the caller warms up)
            run = await engine.store.get_run(LOCAL_PRINCIPAL, run_id)
            assert run is not None, "unknown run"
            frames, cursor = [], 0
            while page := await engine.store.read_events(run.rid, cursor, PAGE):
                frames.extend(frame(e.seq, e.body) for e in page)
                cursor = page[-1].seq
            encoded[run_id] = frames

        async def replay() -> AsyncIterator[str]:
            # Chunked as RunStream chunks a replay: a first small page, then full ones.
            yield retry_preamble()
            yield "".join(frames[after:after + FIRST_PAGE])
            for i in range(after + FIRST_PAGE, len(frames), PAGE):
                yield "".join(frames[i:i + PAGE])

        return EventStream(replay(), headers={"Outlast-Run-Id": run_id},
                           keepalive_seconds=engine.settings.keepalive)


async def serve(data_dir: Path, synchronous: str) -> None:
    settings = Settings(data_dir=data_dir, port=0, sqlite_synchronous=synchronous)
    TRACING.configure()  # as ``outlast serve``: on when the OTEL_* variables ask
    store = open_store(None, data_dir, sqlite_synchronous=synchronous)
    agent, paced = BenchAgent(), PacedAgent()
    engine = Engine(settings, store, {"bench": agent, "paced": paced,
                                      "demo": DemoAgent(settings.workspace)})
    app = create_app(engine)
    add_baselines(app, engine, agent, paced)
    add_floor(app, engine, {"bench": agent, "paced": paced}, data_dir / "floor.sqlite",
              synchronous)
    add_floor_guarded(app, engine, {"bench": agent, "paced": paced},
                      data_dir / "floor-guarded.sqlite", synchronous)
    # The HTTP stack of ``outlast serve`` (h11, as it configures uvicorn).
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", http="h11",
                            lifespan="on", access_log=False, timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started and not task.done():  # noqa: ASYNC110 (uvicorn: a flag)
        await asyncio.sleep(0.02)
    if server.started:
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"outlast serving on http://127.0.0.1:{port}/", flush=True)
    await task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--synchronous", choices=["FULL", "NORMAL"], default="FULL")
    ns = parser.parse_args()
    ns.data_dir.mkdir(parents=True, exist_ok=True)
    tune_interpreter()  # as ``outlast serve`` runs
    asyncio.run(serve(ns.data_dir, ns.synchronous))


if __name__ == "__main__":
    main()
