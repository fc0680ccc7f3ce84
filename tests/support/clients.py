"""One way for async tests to drive either Python client, so both pass the same tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from outlast.client import AsyncClient, Client

KINDS = ("async", "sync")


class Driver:
    """Calls ``AsyncClient`` methods directly and ``Client`` ones in a worker thread."""

    def __init__(self, client: AsyncClient | Client) -> None:
        self.client = client

    async def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self.client, name)
        if isinstance(self.client, AsyncClient):
            return await method(*args, **kwargs)
        return await asyncio.to_thread(method, *args, **kwargs)

    async def events(self, run_id: str, after: int = 0,
                     into: list[tuple[int, dict[str, Any]]] | None = None,
                     ) -> list[tuple[int, dict[str, Any]]]:
        """Every ``(seq, event)`` of ``events()``, appended to ``into`` as they come."""
        out = into if into is not None else []
        if isinstance(self.client, AsyncClient):
            async for item in self.client.events(run_id, after):
                out.append(item)
            return out
        client = self.client

        def read() -> None:
            for item in client.events(run_id, after):
                out.append(item)

        await asyncio.to_thread(read)
        return out


@asynccontextmanager
async def open_client(kind: str, url: str, token: str | None = None,
                      **options: Any) -> AsyncIterator[Driver]:
    """An ``AsyncClient`` (kind ``async``) or a ``Client`` (kind ``sync``) for ``url``."""
    if kind == "async":
        async with AsyncClient(url, token, **options) as ac:
            yield Driver(ac)
        return
    sc = await asyncio.to_thread(Client, url, token, **options)
    try:
        yield Driver(sc)
    finally:
        await asyncio.to_thread(sc.close)
