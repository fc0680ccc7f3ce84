"""Thread resources: list, read, runs, delete, resume."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Header, Query, Request, Response
from sse_starlette import EventSourceResponse

from outlast.engine.runtime import RunOptions
from outlast.engine.streams import RunStream, is_legacy
from outlast.errors import InvalidRequest, ThreadNotFound
from outlast.http.body import read_json
from outlast.http.deps import ID_DOC, EngineDep, Owner, ThreadId, check_id
from outlast.http.sse import SSE_CONTENT, stream_response
from outlast.http.views import run_view, thread_summary, thread_view
from outlast.store.base import ThreadRecord

router = APIRouter()

STATUSES = ("idle", "busy", "interrupted", "error")


async def _thread(engine: EngineDep, owner: str, thread_id: str) -> ThreadRecord:
    check_id(thread_id, "threadId", engine.settings.max_id_length)
    thread = await engine.store.get_thread(owner, thread_id)
    if thread is None:
        raise ThreadNotFound("thread not found", threadId=thread_id)
    return thread


@router.get("/threads", summary="The caller's threads, newest first")
async def list_threads(
    engine: EngineDep, owner: Owner,
    status: str | None = Query(default=None, pattern="^(idle|busy|interrupted|error)$"),
    limit: int = Query(default=50, ge=1, le=500),
    cursor: str | None = Query(default=None, max_length=1000),
) -> dict[str, Any]:
    # The cursor is opaque and owner-scoped: the store makes and checks it.
    page = await engine.store.list_threads(owner, status, limit, cursor or None)
    return {"threads": [thread_summary(t) for t in page.threads],
            "nextCursor": page.next_cursor}


@router.get("/threads/{thread_id}", summary="A thread's snapshot and active run")
async def get_thread(thread_id: ThreadId, engine: EngineDep, owner: Owner) -> dict[str, Any]:
    check_id(thread_id, "threadId", engine.settings.max_id_length)
    view = await engine.store.thread_view(owner, thread_id)
    if view is None:
        raise ThreadNotFound("thread not found", threadId=thread_id)
    return thread_view(view.thread, view.snapshot, view.interrupts, view.current_run)


@router.get("/threads/{thread_id}/runs", summary="A thread's runs, newest first")
async def list_thread_runs(
    thread_id: ThreadId, engine: EngineDep, owner: Owner,
    limit: int = Query(default=50, ge=1, le=500),
    before: str | None = Query(default=None, max_length=200),
) -> dict[str, Any]:
    thread = await _thread(engine, owner, thread_id)
    before_rid = None
    if before:
        anchor = await engine.store.get_run(owner, before)
        if anchor is None or anchor.tid != thread.tid:
            raise InvalidRequest("before must be a runId of this thread")
        before_rid = anchor.rid
    runs = await engine.store.list_runs(thread.tid, limit, before_rid)
    return {"runs": [run_view(r, []) for r in runs],
            "nextBefore": runs[-1].id if len(runs) == limit else None}


@router.delete("/threads/{thread_id}", status_code=204, summary="Delete a thread")
async def delete_thread(thread_id: ThreadId, engine: EngineDep, owner: Owner) -> Response:
    check_id(thread_id, "threadId", engine.settings.max_id_length)
    await engine.store.delete_thread(owner, thread_id)
    return Response(status_code=204)


RESUME_BODY = {
    "requestBody": {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "required": ["resume"],
        "properties": {
            "resume": {"type": "array", "minItems": 1, "items": {
                "type": "object", "required": ["interruptId", "status"],
                "properties": {"interruptId": {"type": "string", **ID_DOC},
                               "status": {"type": "string", "enum": ["resolved", "cancelled"]},
                               "payload": {}}}},
            "runId": {"type": "string", **ID_DOC}, "forwardedProps": {},
        }}}}},
}


@router.post("/threads/{thread_id}/resume", summary="Answer the thread's pending interrupts",
             openapi_extra=RESUME_BODY, response_model=None,
             responses={200: {"description": "The continuation run, or its SSE stream when "
                                             "`Accept: text/event-stream`",
                              "content": SSE_CONTENT}})
async def resume_thread(
    thread_id: ThreadId, request: Request, engine: EngineDep, owner: Owner,
    idempotency_key: str | None = Header(default=None, alias="Idempotency-Key",
                                         json_schema_extra=ID_DOC),
    accept: str | None = Header(default=None),
) -> dict[str, Any] | EventSourceResponse:
    s = engine.settings
    thread = await _thread(engine, owner, thread_id)
    body = await read_json(request, s.max_body_bytes, s.body_timeout)
    if not isinstance(body, dict) or not isinstance(body.get("resume"), list) \
            or not body["resume"]:
        raise InvalidRequest('the body must be {"resume": [ResumeEntry, ...]} (non-empty)')
    for entry in body["resume"]:
        if not isinstance(entry, dict):
            raise InvalidRequest("each resume entry is an object")
        check_id(entry.get("interruptId"), "resume[].interruptId", s.max_id_length)
        if entry.get("status") not in ("resolved", "cancelled"):
            raise InvalidRequest("resume[].status must be resolved or cancelled")
    run_id = body.get("runId") or f"resume-{uuid.uuid4().hex}"
    check_id(run_id, "runId", s.max_id_length)
    if idempotency_key is not None:
        check_id(idempotency_key, "Idempotency-Key", s.max_id_length)
    runs = await engine.store.list_runs(thread.tid, 1, None)
    agent = runs[0].agent if runs else "demo"
    run_input: dict[str, Any] = {
        "threadId": thread_id, "runId": run_id, "messages": [], "state": None,
        "tools": [], "context": [], "resume": [
            {k: v for k, v in e.items() if k in ("interruptId", "status", "payload")}
            for e in body["resume"]],
        "protocolVersion": "1.0",
    }
    if body.get("forwardedProps") is not None:
        run_input["forwardedProps"] = body["forwardedProps"]
    result = await engine.admit(owner, agent, run_input, RunOptions(
        key=idempotency_key or (body.get("runId") and run_id), multitask="reject"))
    if accept and "text/event-stream" in accept:
        headers = {"Outlast-Run-Id": result.run.id, "Outlast-Thread-Id": thread_id}
        if not result.created:
            headers["Outlast-Replayed"] = "true"
        return stream_response(RunStream(engine, result.run, legacy=is_legacy("1.0")).frames(0),
                               headers=headers, keepalive_seconds=s.keepalive)
    return {"run": run_view(result.run, []), "replayed": not result.created}
