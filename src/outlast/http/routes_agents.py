"""``POST /agents/{agent}`` (the AG-UI endpoint) and ``GET /agents``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from ag_ui.core import (
    AgentCapabilities,
    HumanInTheLoopCapabilities,
    StateCapabilities,
    TransportCapabilities,
)
from fastapi import APIRouter, Header, Request

from outlast.agent import Capabilities
from outlast.engine.admission import RunOptions
from outlast.engine.webhooks import check_request_webhook
from outlast.errors import Draining
from outlast.http.deps import (
    ID_DOC,
    EngineDep,
    Principal,
    check_after,
    check_id,
    choice,
    parse_seq,
)
from outlast.http.request_limits import JsonBodyRoute, body_of, release_body
from outlast.http.request_models import RunAgentInput, check_limits
from outlast.http.sse import SSE_CONTENT, EventStream
from outlast.http.streams import RunStream, hydration_frames, is_legacy
from outlast.tracing import TRACING

if TYPE_CHECKING:
    from outlast.engine.runtime import Engine
    from outlast.store.base import Multitask
    from outlast.store.records import AdmitResult

router = APIRouter(route_class=JsonBodyRoute, strict_content_type=False)


@router.get("/agents", summary="Registered agents and their capabilities")
async def list_agents(engine: EngineDep, principal: Principal) -> dict[str, Any]:
    """Each agent's own declaration, and its AG-UI 1.0 ``capabilities``."""
    notifies = bool(engine.settings.webhooks or engine.settings.webhook_allow)
    return {"agents": [{"name": name, **agent.capabilities.to_json(),
                        "capabilities": agui_capabilities(agent.capabilities, notifies)}
                       for name, agent in sorted(engine.agents.items())]}


def agui_capabilities(declared: Capabilities, notifies: bool) -> dict[str, Any]:
    """AG-UI 1.0 capability discovery: every outlast stream is resumable (each event's
    SSE id is its seq; ``custom.outlast.resume`` says how), and what the agent declared."""
    hitl = declared.interrupts or None
    return AgentCapabilities(
        transport=TransportCapabilities(streaming=True, resumable=True,
                                        push_notifications=notifies or None),
        state=StateCapabilities(snapshots=True, deltas=True, persistent_state=True),
        human_in_the_loop=HumanInTheLoopCapabilities(supported=hitl, interrupts=hitl,
                                                     approvals=hitl),
        custom={"outlast": {"resume": {
            "events": "GET /runs/{runId}/events",
            "cursor": "Last-Event-ID",  # or ?after=<seq>; the SSE id of every event
            "retry": "POST the same input again (same runId or Idempotency-Key): it "
                     "attaches to the run, from Last-Event-ID if sent",
            "cancel": "POST /runs/{runId}/cancel",
            "crashResume": declared.supports_resume,
            "journaledEffects": declared.journaled_effects,
        }},
            # docs/resumable-ag-ui.md §11: the binding's own details, for any client of it
            # (run resources relative to this endpoint's URL).
            "resumableAgUi": {"version": "0.1", "events": "../runs/{runId}/events",
                              "cancel": "../runs/{runId}/cancel",
                              "crashResume": declared.supports_resume}},
    ).model_dump(mode="json", by_alias=True, exclude_none=True)


@router.post("/agents/{agent}", summary="Run an agent (AG-UI)", response_model=None,
             response_class=EventStream,
             responses={200: {"description": "AG-UI event stream", "content": SSE_CONTENT}})
async def run_agent(
    agent: str,
    agent_input: RunAgentInput,
    request: Request,
    engine: EngineDep,
    principal: Principal,
    idempotency_key: str | None = Header(default=None, alias="Idempotency-Key",
                                         json_schema_extra=ID_DOC),
    on_disconnect: str | None = Header(default=None, alias="Outlast-On-Disconnect",
                                       json_schema_extra={"enum": ["continue", "cancel"]}),
    multitask: str | None = Header(default=None, alias="Outlast-Multitask", json_schema_extra={
        "enum": ["reject", "enqueue", "interrupt"]}),
    last_event_id: str | None = Header(default=None, alias="Last-Event-ID",
                                       json_schema_extra={"pattern": "^[0-9]{1,16}$"}),
    webhook: str | None = Header(default=None, alias="Outlast-Webhook", json_schema_extra={
        "format": "uri", "description": "Also notify this URL of the run's end or "
        "interrupt; it must start with a --webhook-allow prefix"}),
) -> EventStream:
    """Admits the run of a ``RunAgentInput`` and streams it; a body with no messages and
    no resume hydrates the thread instead (spec §3)."""
    s = engine.settings
    engine.agent(agent)
    if engine.draining:
        raise Draining("the server is shutting down; retry on another instance")
    after = parse_seq(last_event_id, "Last-Event-ID")
    disconnect = choice(on_disconnect, ("continue", "cancel"), s.on_disconnect,
                        "Outlast-On-Disconnect")
    policy = cast("Multitask", choice(multitask, ("reject", "enqueue", "interrupt"),
                                       s.multitask, "Outlast-Multitask"))
    if idempotency_key is not None:
        check_id(idempotency_key, "Idempotency-Key", s.max_id_length)
    if webhook is not None:  # every POST here, a hydration too: one rule for the header
        check_request_webhook(s, webhook)
    # Admitted as it arrived: the validated model would re-serialize it differently.
    body: dict[str, Any] = check_limits(body_of(request), s)
    legacy = is_legacy(agent_input.protocol_version)
    if not agent_input.messages and not agent_input.resume:
        return await _hydration(engine, principal, agent_input, legacy)
    result = await engine.admit(principal, agent, body, RunOptions(
        key=idempotency_key, on_disconnect=disconnect, multitask=policy, webhook=webhook,
        trace=TRACING.new_run(request.headers.get("traceparent"))))
    release_body(request, agent_input)  # stored: the stream must not hold it for the run's life
    return _run_stream(engine, principal, result, after, cancel=disconnect == "cancel",
                       legacy=legacy)


async def _hydration(engine: Engine, principal: str, agent_input: RunAgentInput,
                     legacy: bool) -> EventStream:
    """Hydration (spec §3): stream the thread, run nothing."""
    view = await engine.thread_view(principal, agent_input.thread_id)
    current = view.current_run if view is not None else None
    return EventStream(
        hydration_frames(engine, principal, view, agent_input.thread_id, agent_input.run_id,
                         legacy=legacy),
        headers={"Outlast-Run-Id": current.id if current else agent_input.run_id,
                 "Outlast-Thread-Id": agent_input.thread_id},
        keepalive_seconds=engine.settings.keepalive)


def _run_stream(engine: Engine, principal: str, result: AdmitResult, after: int, *,
                cancel: bool, legacy: bool) -> EventStream:
    """The admitted run's stream: from its start when it was created now, else (a retry
    that attached) after the client's ``Last-Event-ID``."""
    run = result.run
    headers = {"Outlast-Run-Id": run.id, "Outlast-Thread-Id": run.thread_id}
    if result.created:
        after = 0  # a new run: nothing of it was ever shown, whatever the header says
    else:
        headers["Outlast-Replayed"] = "true"
        after = check_after(after, run.last_seq, "Last-Event-ID")

    cancel_on_disconnect = None
    if result.created and cancel:
        async def cancel_on_disconnect() -> None:
            # G1: only the stream that created the run, and never because we drain.
            if not engine.draining:
                await engine.cancel(principal, run.id)

    stream = RunStream(engine, run, legacy=legacy, first=result.first)
    return EventStream(stream.frames(after), headers=headers,
                       keepalive_seconds=engine.settings.keepalive,
                       on_disconnect=cancel_on_disconnect)
