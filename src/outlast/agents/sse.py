"""A small SSE reader for agents that consume remote event streams."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx


async def sse_data(resp: httpx.Response) -> AsyncIterator[str]:
    """The ``data`` payload of every event in an SSE response body."""
    data: list[str] = []
    async for line in resp.aiter_lines():
        if line == "":
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield "\n".join(data)
