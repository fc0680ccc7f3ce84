"""Proxy mode: any remote AG-UI HTTP endpoint, made durable by outlast.

The remote agent does the work; outlast stores its events, serves reattach,
replay, cancel and interrupts. The remote side is stateless from outlast's
point of view: each run sends it the whole conversation.
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from outlast.agent import Agent, AgentError, Capabilities, RunContext
from outlast.agents.sse import sse_data
from outlast.protocol.events import RESERVED


class RemoteAgent(Agent):
    """Relays one run to a remote AG-UI endpoint and re-emits its events."""

    capabilities = Capabilities(
        description="Proxy to a remote AG-UI endpoint",
        supports_resume=False,  # the remote run cannot be resumed mid-way: fail on crash
        interrupts=True,
    )

    def __init__(self, url: str, *, headers: dict[str, str] | None = None,
                 timeout: float = 3600.0) -> None:
        self.url = url
        self.headers = headers or {}
        self.timeout = timeout

    async def run(self, ctx: RunContext) -> None:
        body: dict[str, Any] = ctx.input.model_dump(mode="json", by_alias=True)
        body["messages"] = ctx.messages
        body["state"] = ctx.state
        async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=self.timeout)) as client:
            try:
                async with client.stream(
                        "POST", self.url, json=body,
                        headers={"Accept": "text/event-stream", **self.headers}) as resp:
                    if resp.status_code >= 400:
                        await resp.aread()
                        raise AgentError(f"The remote agent answered {resp.status_code}.",
                                         code="remote_error")
                    async for data in sse_data(resp):
                        event = json.loads(data)
                        kind = event.get("type")
                        if kind == "RUN_ERROR":
                            raise AgentError(str(event.get("message") or "The remote agent "
                                             "failed."), code=str(event.get("code") or
                                                                  "remote_error"))
                        if kind == "RUN_FINISHED":
                            outcome = event.get("outcome") or {}
                            if outcome.get("type") == "interrupt":
                                await ctx.interrupt(*outcome.get("interrupts") or [])
                            return
                        if kind not in RESERVED:
                            await ctx.emit(event)
            except httpx.HTTPError as exc:
                raise AgentError(f"The remote agent could not be reached "
                                 f"({type(exc).__name__}).", code="remote_unreachable") from exc
        raise AgentError("The remote agent's stream ended without RUN_FINISHED.",
                         code="remote_incomplete")


def factory(settings: Any = None) -> RemoteAgent:
    """``--agent NAME=outlast.agents.proxy:factory`` with ``OUTLAST_PROXY_URL`` (and
    optionally ``OUTLAST_PROXY_TOKEN`` sent as a bearer token)."""
    url = os.environ.get("OUTLAST_PROXY_URL")
    if not url:
        raise SystemExit("the proxy agent needs OUTLAST_PROXY_URL")
    token = os.environ.get("OUTLAST_PROXY_TOKEN")
    return RemoteAgent(url, headers={"Authorization": f"Bearer {token}"} if token else None)
