"""The HTTP edge's own promises: the resume body and its continuation, request bodies
in the OpenAPI document, and ``/docs`` that works without a network."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.support.agents import AGENT_ENV, ASK_AGENT
from tests.support.runs import run_record, uid, wait_final
from tests.support.server import Frame, ServerProcess, collect, demo_input, sse_frames


@pytest.fixture
def server(server_factory: Any) -> ServerProcess:
    return server_factory("--keepalive", "2", "--agent", ASK_AGENT,  # type: ignore[no-any-return]
                          env=AGENT_ENV)


async def interrupted(client: httpx.AsyncClient, agent: str, body: dict[str, Any]) -> str:
    """Run ``body`` to its interrupt; the pending interrupt's id."""
    resp, frames = await collect(client, "POST", f"/agents/{agent}", json=body)
    assert resp.status_code == 200
    assert frames[-1].event["outcome"]["type"] == "interrupt", frames[-1].event
    [pending] = (await client.get(f"/threads/{body['threadId']}")).json()["interrupts"]
    return str(pending["id"])


@pytest.mark.parametrize("version", [None, "0.3", "1.0"])
async def test_a_resume_stream_speaks_the_protocol_of_the_run_it_continues(
        client: httpx.AsyncClient, version: str | None) -> None:
    # spec §3: a cancelled run ends in RUN_ERROR "cancelled" for clients before AG-UI 1.0.
    thread_id, cont_id = uid("t"), uid("cont")
    body = demo_input(thread_id, uid("r"), steps=2, approve_at=[1])
    del body["protocolVersion"]
    if version is not None:
        body["protocolVersion"] = version
    interrupt_id = await interrupted(client, "demo", body)
    frames: list[Frame] = []
    async with client.stream(
            "POST", f"/threads/{thread_id}/resume", headers={"Accept": "text/event-stream"},
            json={"resume": [{"interruptId": interrupt_id, "status": "resolved",
                              "payload": {"approved": True}}],
                  "runId": cont_id, "forwardedProps": {"demo": {"step_delay_ms": 60000}}},
    ) as resp:
        assert resp.status_code == 200
        async for frame in sse_frames(resp):
            frames.append(frame)
            if len(frames) == 1:
                assert (await client.post(f"/runs/{cont_id}/cancel")).status_code in (200, 202)
    # A reattach reads the same version from the run's record (schema 12), unless the
    # request names one.
    _, replayed = await collect(client, "GET", f"/runs/{cont_id}/events?follow=false")
    _, as_asked = await collect(client, "GET",
                                f"/runs/{cont_id}/events?follow=false&protocolVersion=1.0")
    for end in (frames[-1].event, replayed[-1].event):
        if version == "1.0":
            assert end["type"] == "RUN_FINISHED" and end["outcome"] == {"type": "cancelled"}
        else:
            assert end["type"] == "RUN_ERROR" and end["code"] == "cancelled"
    assert as_asked[-1].event["type"] == "RUN_FINISHED"
    record = await run_record(client, cont_id)
    assert (record["agent"], record["status"]) == ("demo", "cancelled")


async def test_the_continuation_runs_the_agent_that_raised_the_interrupts(
        client: httpx.AsyncClient) -> None:
    thread_id = uid("t")
    body = demo_input(thread_id, uid("r"))
    body["forwardedProps"] = {"ask": {"interrupts": [{"id": "q1"}]}}
    interrupt_id = await interrupted(client, "ask", body)
    r = await client.post(f"/threads/{thread_id}/resume",
                          json={"resume": [{"interruptId": interrupt_id, "status": "resolved",
                                            "payload": "yes"}]})
    assert r.status_code == 200, r.text
    run = r.json()["run"]
    assert run["agent"] == "ask"
    assert (await wait_final(client, run["runId"]))["status"] == "succeeded"


async def test_a_resume_on_a_thread_with_nothing_pending_is_refused(
        client: httpx.AsyncClient) -> None:
    thread_id = uid("t")
    resp, _ = await collect(client, "POST", "/agents/ask", json=demo_input(thread_id, uid("r")))
    assert resp.status_code == 200
    before = (await client.get(f"/threads/{thread_id}/runs")).json()
    r = await client.post(f"/threads/{thread_id}/resume",
                          json={"resume": [{"interruptId": "i", "status": "cancelled"}]})
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "interrupt_not_pending"
    assert (await client.get(f"/threads/{thread_id}/runs")).json() == before


async def test_the_openapi_document_shows_every_request_body(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    schemas = doc["components"]["schemas"]

    def body_schema(path: str) -> dict[str, Any]:
        ref = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        return schemas[ref["$ref"].rsplit("/", 1)[-1]]  # type: ignore[no-any-return]

    run_input = body_schema("/agents/{agent}")
    assert {"threadId", "runId", "messages"} <= set(run_input["required"])
    resume = body_schema("/threads/{thread_id}/resume")
    assert resume["required"] == ["resume"]
    entry = schemas[resume["properties"]["resume"]["items"]["$ref"].rsplit("/", 1)[-1]]
    assert entry["required"] == ["interruptId", "status"]
    assert entry["properties"]["status"]["enum"] == ["resolved", "cancelled"]
    assert {"$ref": "#/components/schemas/Approval"} in entry["properties"]["payload"]["anyOf"]
    assert schemas["Approval"]["required"] == ["approved"]
    assert "interrupt_not_pending" in doc["paths"]["/threads/{thread_id}/resume"]["post"][
        "description"]


async def test_docs_load_every_asset_from_this_server(client: httpx.AsyncClient) -> None:
    page = await client.get("/docs")
    assert page.status_code == 200
    assert "SwaggerUIBundle" in page.text
    urls = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert any(u.endswith(".js") for u in urls) and any(u.endswith(".css") for u in urls)
    for url in urls:
        assert url.startswith("/"), url  # this server, never another host
        asset = await client.get(url)
        assert asset.status_code == 200, url
        assert asset.content
