"""``POST /threads/{thread_id}/fork``: branch a thread at a safe boundary (spec §3)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from outlast.http.deps import EngineDep, Principal, ThreadId, check_id
from outlast.http.request_limits import JsonBodyRoute
from outlast.http.request_models import ForkBody, check_length
from outlast.http.views import thread_view

router = APIRouter(route_class=JsonBodyRoute, strict_content_type=False)

FORK_DESCRIPTION = """\
Creates a new thread of the caller holding the thread's snapshot at a safe boundary:
its messages, state and the interrupts pending there, not the later runs. The
original is untouched. Body: `{"threadId"?, "asOf"?: {"runId", "seq"}}` (default: the
latest boundary) or `{"threadId"?, "beforeMessageId"}` (the boundary just before that
message: edit and regenerate). `session_state` follows only a fork at the latest
boundary.

Answers 201 with the new thread, which shows `forkedFrom: {"threadId", "runId",
"seq"}`. A seq that is not a boundary is 422; events removed by retention, 410
`run_compacted`; a taken `threadId`, 409 `thread_id_conflict`."""


@router.post("/threads/{thread_id}/fork", status_code=201, summary="Branch a thread",
             description=FORK_DESCRIPTION, response_model=None)
async def fork_thread(thread_id: ThreadId, body: ForkBody,
                      engine: EngineDep, principal: Principal) -> JSONResponse:
    max_id = engine.settings.max_id_length
    check_id(thread_id, "threadId", max_id)
    for what, value in (("body.threadId", body.threadId),
                        ("asOf.runId", body.asOf.runId if body.asOf else None),
                        ("beforeMessageId", body.beforeMessageId)):
        if value is not None:
            check_length(value, what, max_id)
    at = None if body.asOf is None else (body.asOf.runId, body.asOf.seq)
    view = await engine.fork(principal, thread_id, new_id=body.threadId, at=at,
                             before_message_id=body.beforeMessageId)
    payload: dict[str, Any] = thread_view(view.thread, view.snapshot, view.interrupts,
                                          view.current_run)
    return JSONResponse(payload, status_code=201)
