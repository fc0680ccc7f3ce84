"""Run resources: record, event stream, cancel."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse

from outlast.engine.usage import row_json
from outlast.http.deps import EngineDep, Principal, RunId, check_after, check_id, parse_seq
from outlast.http.sse import SSE_CONTENT, EventStream
from outlast.http.streams import RunStream, is_legacy
from outlast.http.views import run_view

if TYPE_CHECKING:
    from outlast.store.base import RunRecord

router = APIRouter()


async def _run(engine: EngineDep, principal: str, run_id: str) -> RunRecord:
    check_id(run_id, "runId", engine.settings.max_id_length)
    return await engine.run(principal, run_id)


async def _record(engine: EngineDep, run: RunRecord) -> dict[str, Any]:
    """The run's record as ``GET /runs/{id}`` shows it: interrupts, webhooks, usage."""
    view = run_view(run, await engine.run_interrupts(run), await engine.run_webhooks(run))
    view["usage"] = [row_json(u) for u in await engine.run_usage(run)]
    return view


@router.get("/runs/{run_id}", summary="A run's record")
async def get_run(run_id: RunId, engine: EngineDep, principal: Principal) -> dict[str, Any]:
    return await _record(engine, await _run(engine, principal, run_id))


@router.get("/runs/{run_id}/events", summary="Replay and follow a run's events (SSE)",
            response_model=None, response_class=EventStream,
            responses={200: {"description": "AG-UI event stream", "content": SSE_CONTENT}})
async def run_events(
    run_id: RunId, engine: EngineDep, principal: Principal,
    after: str | None = Query(default=None, max_length=20),
    follow: bool = Query(default=True),
    protocol_version: str | None = Query(default=None, alias="protocolVersion", max_length=20),
    last_event_id: str | None = Header(default=None, alias="Last-Event-ID"),
) -> EventStream:
    run = await _run(engine, principal, run_id)
    what = "Last-Event-ID" if last_event_id else "after"
    start = check_after(parse_seq(last_event_id or after, what), run.last_seq, what)
    version = protocol_version or run.protocol_version
    stream = RunStream(engine, run, legacy=is_legacy(version))
    return EventStream(stream.frames(start, follow=follow),
                       headers={"Outlast-Run-Id": run.id, "Outlast-Thread-Id": run.thread_id},
                       keepalive_seconds=engine.settings.keepalive)


@router.post("/runs/{run_id}/cancel", summary="Stop a run (idempotent)", response_model=None,
             responses={200: {"description": "final"},
                        202: {"description": "cancelling",
                              "content": {"application/json": {"schema": {"type": "object"}}}}})
async def cancel_run(
    run_id: RunId, engine: EngineDep, principal: Principal,
    wait: bool = Query(default=False),
) -> JSONResponse:
    check_id(run_id, "runId", engine.settings.max_id_length)
    run = await engine.cancel(principal, run_id, wait=wait)
    return JSONResponse(await _record(engine, run),
                        status_code=200 if engine.is_final(run) else 202)
