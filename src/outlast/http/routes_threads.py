"""Thread resources: list, read, runs, delete, resume."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Header, Query, Request, Response

from outlast.engine.admission import RunOptions
from outlast.errors import ThreadNotFound
from outlast.http.deps import ID_DOC, EngineDep, Principal, ThreadId, check_id
from outlast.http.request_limits import JsonBodyRoute, body_of
from outlast.http.request_models import ResumeBody, check_limits
from outlast.http.sse import SSE_CONTENT, EventStream
from outlast.http.streams import RunStream, is_legacy
from outlast.http.views import run_view, thread_summary, thread_view
from outlast.tracing import TRACING

router = APIRouter(route_class=JsonBodyRoute, strict_content_type=False)


@router.get("/threads", summary="The caller's threads, newest first")
async def list_threads(
    engine: EngineDep, principal: Principal,
    status: str | None = Query(default=None, pattern="^(idle|busy|interrupted|error)$"),
    limit: int = Query(default=50, ge=1, le=500),
    cursor: str | None = Query(default=None, max_length=1000),
) -> dict[str, Any]:
    threads, nxt = await engine.threads(principal, status, limit, cursor)
    return {"threads": [thread_summary(t) for t in threads], "nextCursor": nxt}


@router.get("/threads/{thread_id}", summary="A thread's snapshot and active run")
async def get_thread(thread_id: ThreadId, engine: EngineDep,
                     principal: Principal) -> dict[str, Any]:
    check_id(thread_id, "threadId", engine.settings.max_id_length)
    view = await engine.thread_view(principal, thread_id)
    if view is None:
        raise ThreadNotFound("thread not found", threadId=thread_id)
    return thread_view(view.thread, view.snapshot, view.interrupts, view.current_run)


@router.get("/threads/{thread_id}/runs", summary="A thread's runs, newest first")
async def list_thread_runs(
    thread_id: ThreadId, engine: EngineDep, principal: Principal,
    limit: int = Query(default=50, ge=1, le=500),
    before: str | None = Query(default=None, max_length=200),
) -> dict[str, Any]:
    check_id(thread_id, "threadId", engine.settings.max_id_length)
    runs = await engine.thread_runs(principal, thread_id, limit, before)
    return {"runs": [run_view(r, []) for r in runs],
            "nextBefore": runs[-1].id if len(runs) == limit else None}


@router.delete("/threads/{thread_id}", status_code=204, summary="Delete a thread")
async def delete_thread(thread_id: ThreadId, engine: EngineDep, principal: Principal) -> Response:
    check_id(thread_id, "threadId", engine.settings.max_id_length)
    await engine.delete_thread(principal, thread_id)
    return Response(status_code=204)


RESUME_DESCRIPTION = """\
Answers every pending interrupt of the thread without an AG-UI client and starts the
continuation run, with the agent of the run that raised the interrupts.

Body: `{"resume": [ResumeEntry, ...], "runId"?, "forwardedProps"?}`; a `ResumeEntry` is
`{"interruptId", "status": "resolved" | "cancelled", "payload"?}`, and an approval's
payload is `{"approved": bool, "editedArgs"?: {...}}`.

A thread without pending interrupts answers 409 `interrupt_not_pending`; answers that
leave one unanswered, 422 `resume_incomplete`."""


@router.post("/threads/{thread_id}/resume", summary="Answer the thread's pending interrupts",
             description=RESUME_DESCRIPTION, response_model=None,
             responses={200: {"description": "The continuation run, or its SSE stream when "
                                             "`Accept: text/event-stream`",
                              "content": SSE_CONTENT}})
async def resume_thread(
    thread_id: ThreadId, answers: ResumeBody, request: Request, engine: EngineDep,
    principal: Principal,
    idempotency_key: str | None = Header(default=None, alias="Idempotency-Key",
                                         json_schema_extra=ID_DOC),
    accept: str | None = Header(default=None),
) -> dict[str, Any] | EventStream:
    s = engine.settings
    check_id(thread_id, "threadId", s.max_id_length)
    if idempotency_key is not None:
        check_id(idempotency_key, "Idempotency-Key", s.max_id_length)
    body = check_limits(body_of(request), s)
    interrupted = await engine.interrupted_run(principal, thread_id)
    run_id = answers.runId or f"resume-{uuid.uuid4().hex}"
    run_input: dict[str, Any] = {
        "threadId": thread_id, "runId": run_id, "messages": [], "state": None,
        "tools": [], "context": [], "resume": [
            {k: v for k, v in e.items() if k in ("interruptId", "status", "payload")}
            for e in body["resume"]],
    }
    # The continuation speaks the protocol version of the run it continues: the
    # thread's client reads it (hydration, GET /runs/{id}/events) as it read that one.
    protocol = interrupted.protocol_version
    if protocol is not None:
        run_input["protocolVersion"] = protocol
    if answers.forwardedProps is not None:
        run_input["forwardedProps"] = body["forwardedProps"]
    result = await engine.admit(principal, interrupted.agent, run_input, RunOptions(
        key=idempotency_key or answers.runId, multitask="reject",
        trace=TRACING.new_run(request.headers.get("traceparent"))))
    if accept and "text/event-stream" in accept:
        headers = {"Outlast-Run-Id": result.run.id, "Outlast-Thread-Id": thread_id}
        if not result.created:
            headers["Outlast-Replayed"] = "true"
        stream = RunStream(engine, result.run, legacy=is_legacy(protocol), first=result.first)
        return EventStream(stream.frames(0), headers=headers, keepalive_seconds=s.keepalive)
    return {"run": run_view(result.run, []), "replayed": not result.created}
