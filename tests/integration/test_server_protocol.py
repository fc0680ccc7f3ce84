"""``outlast serve``'s HTTP protocol offers every request its connection's abort (the
``outlast.abort`` scope extension), which a response that cannot finish uses so that
uvicorn counts it as the client's disconnect, not an unfinished response. Real uvicorn
on 127.0.0.1, a real client."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest
import uvicorn

from outlast.http.server import ABORT, guarded_protocol
from tests.support.server import wait_for


async def test_a_response_that_aborts_its_connection_is_a_disconnect_not_an_error(
        caplog: pytest.LogCaptureFixture) -> None:
    offered: list[Any] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        abort = (scope.get("extensions") or {}).get(ABORT)
        offered.append(abort)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"part", "more_body": True})
        if scope["path"] == "/abort":
            abort()
            await asyncio.sleep(0)  # the server learns of it (as EventStream's cancel lets it)
        # Either way the response is left unfinished.

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off",
                                           log_level="warning", log_config=None,
                                           http=guarded_protocol(10, 5.0)))
    task = asyncio.create_task(server.serve())
    try:
        await wait_for(lambda: _started(server, task))
        port = server.servers[0].sockets[0].getsockname()[1]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            with caplog.at_level(logging.ERROR, logger="uvicorn.error"):
                for path in ("/abort", "/unfinished"):
                    with pytest.raises(httpx.HTTPError):
                        await client.get(path)
                    await asyncio.sleep(0.1)
    finally:
        server.should_exit = True
        await task
    assert len(offered) == 2 and all(callable(a) for a in offered)
    errors = [r.getMessage() for r in caplog.records if r.name == "uvicorn.error"]
    # Only the response that did not abort is uvicorn's error: the check can fail.
    assert errors == ["ASGI callable returned without completing response."], errors


async def _started(server: uvicorn.Server, task: asyncio.Task[None]) -> bool:
    return server.started or task.done()
