"""``POST /agents/{agent}`` (the AG-UI endpoint) and ``GET /agents``."""

from __future__ import annotations

from typing import Any, cast

from ag_ui.core import RunAgentInput
from fastapi import APIRouter, Header, Request
from pydantic import ValidationError
from sse_starlette import EventSourceResponse

from outlast.engine.runtime import RunOptions
from outlast.engine.streams import RunStream, hydration_frames, is_legacy
from outlast.errors import Draining, InvalidRequest
from outlast.http.body import read_json
from outlast.http.deps import (
    ID_DOC,
    EngineDep,
    Owner,
    check_after,
    check_id,
    choice,
    parse_seq,
)
from outlast.http.sse import SSE_CONTENT, stream_response
from outlast.store.base import Strategy

router = APIRouter()


def _input_schema() -> dict[str, Any]:
    """RunAgentInput as the official AG-UI types define it (references inlined, so the
    document needs no extra components), plus our rules for ids."""
    schema = RunAgentInput.model_json_schema(by_alias=True)
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {k: inline(v) for k, v in node.items() if k != "discriminator"}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    schema = inline(schema)
    props = schema["properties"]
    props["threadId"] = props["runId"] = {"type": "string", **ID_DOC}
    for message in props["messages"]["items"]["oneOf"]:
        message["properties"]["id"] = {"type": "string", "minLength": 1, "maxLength": 200}
    for option in props["resume"]["anyOf"]:
        if option.get("type") == "array":
            option["items"]["properties"]["interruptId"] = {"type": "string", **ID_DOC}
    return cast(dict[str, Any], schema)


RUN_AGENT_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": _input_schema()}},
    },
    "responses": {"200": {"description": "AG-UI event stream", "content": SSE_CONTENT}},
}


def validate_input(body: Any, max_messages: int, max_id: int) -> dict[str, Any]:
    """A RunAgentInput body, checked as the official types and our limits say."""
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a RunAgentInput JSON object")
    try:
        RunAgentInput.model_validate(body)
    except ValidationError as exc:
        problems = [{"loc": [str(p) for p in e["loc"]], "msg": e["msg"]}
                    for e in exc.errors()[:20]]
        raise InvalidRequest("the body is not a valid RunAgentInput", problems=problems) from None
    check_id(body["threadId"], "threadId", max_id)
    check_id(body["runId"], "runId", max_id)
    messages = body.get("messages") or []
    if len(messages) > max_messages:
        raise InvalidRequest(f"at most {max_messages} messages per request", limit=max_messages)
    for m in messages:
        if not isinstance(m.get("id"), str) or not m["id"] or len(m["id"]) > max_id:
            raise InvalidRequest("every message needs a string id", field="messages")
    for entry in body.get("resume") or []:
        check_id(entry.get("interruptId"), "resume[].interruptId", max_id)
    return cast(dict[str, Any], body)


@router.get("/agents", summary="Registered agents and their capabilities")
async def list_agents(engine: EngineDep, owner: Owner) -> dict[str, Any]:
    return {"agents": [{"name": name, **agent.capabilities.to_json()}
                       for name, agent in sorted(engine.agents.items())]}


@router.post("/agents/{agent}", summary="Run an agent (AG-UI)", openapi_extra=RUN_AGENT_BODY,
             response_model=None, response_class=EventSourceResponse)
async def run_agent(
    agent: str,
    request: Request,
    engine: EngineDep,
    owner: Owner,
    idempotency_key: str | None = Header(default=None, alias="Idempotency-Key",
                                         json_schema_extra=ID_DOC),
    on_disconnect: str | None = Header(default=None, alias="Outlast-On-Disconnect",
                                       json_schema_extra={"enum": ["continue", "cancel"]}),
    multitask: str | None = Header(default=None, alias="Outlast-Multitask", json_schema_extra={
        "enum": ["reject", "enqueue", "interrupt"]}),
    last_event_id: str | None = Header(default=None, alias="Last-Event-ID",
                                       json_schema_extra={"pattern": "^[0-9]{1,16}$"}),
) -> EventSourceResponse:
    s = engine.settings
    engine.agent(agent)
    if engine.draining:
        raise Draining("the server is shutting down; retry on another instance")
    after = parse_seq(last_event_id, "Last-Event-ID")
    disconnect = choice(on_disconnect, ("continue", "cancel"), s.on_disconnect,
                        "Outlast-On-Disconnect")
    strategy = cast(Strategy, choice(multitask, ("reject", "enqueue", "interrupt"),
                                     s.multitask, "Outlast-Multitask"))
    if idempotency_key is not None:
        check_id(idempotency_key, "Idempotency-Key", s.max_id_length)
    body = validate_input(await read_json(request, s.max_body_bytes, s.body_timeout),
                          s.max_messages, s.max_id_length)
    legacy = is_legacy(body.get("protocolVersion"))
    if not body.get("messages") and not body.get("resume"):
        # Hydration (SPEC §3): stream the thread, run nothing.
        view = await engine.store.thread_view(owner, body["threadId"])
        current = view.current_run if view is not None else None
        return stream_response(
            hydration_frames(engine, owner, view, body["threadId"], body["runId"],
                             legacy=legacy),
            headers={"Outlast-Run-Id": current.id if current else body["runId"],
                     "Outlast-Thread-Id": body["threadId"]},
            keepalive_seconds=s.keepalive)
    result = await engine.admit(owner, agent, body, RunOptions(
        key=idempotency_key, on_disconnect=disconnect, multitask=strategy))
    run = result.run
    headers = {"Outlast-Run-Id": run.id, "Outlast-Thread-Id": run.thread_id}
    if result.created:
        after = 0  # a new run: nothing of it was ever shown, whatever the header says
    else:
        headers["Outlast-Replayed"] = "true"
        after = check_after(after, run.last_seq, "Last-Event-ID")

    cancel_on_disconnect = None
    if result.created and disconnect == "cancel":
        async def cancel_on_disconnect() -> None:
            # G1: only the stream that created the run, and never because we drain.
            if not engine.draining:
                await engine.cancel(owner, run.id)

    stream = RunStream(engine, run, legacy=legacy)
    return stream_response(stream.frames(after), headers=headers,
                           keepalive_seconds=s.keepalive, on_disconnect=cancel_on_disconnect)
