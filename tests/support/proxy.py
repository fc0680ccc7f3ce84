"""A TCP proxy on loopback that cuts every connection after a random number of bytes
from the server, to show that clients resume streams across dropped connections."""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from concurrent.futures import Future


class CuttingProxy:
    """Forwards each connection to ``127.0.0.1:upstream_port``; after ``min_bytes`` to
    ``max_bytes`` (seeded random) of the server's answer, aborts both sides.

    It runs its own event loop in a thread, so blocking clients can use it too.
    """

    def __init__(self, upstream_port: int, *, min_bytes: int = 400, max_bytes: int = 4000,
                 seed: int = 7) -> None:
        self.upstream_port = upstream_port
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.rng = random.Random(seed)
        self.connections = 0
        self.cuts = 0
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    def start(self) -> CuttingProxy:
        self._thread.start()
        fut: Future[asyncio.Server] = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", 0), self._loop)
        self._server = fut.result(10)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        budget = self.rng.randint(self.min_bytes, self.max_bytes)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.transport.abort()
            return

        async def to_server() -> None:
            while data := await reader.read(65536):
                up_writer.write(data)
                await up_writer.drain()

        async def to_client() -> None:
            nonlocal budget
            while budget > 0:
                data = await up_reader.read(min(65536, budget))
                if not data:
                    return
                writer.write(data)
                await writer.drain()
                budget -= len(data)
            self.cuts += 1

        tasks = [asyncio.create_task(to_server()), asyncio.create_task(to_client())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.gather(*tasks, return_exceptions=True)
            writer.transport.abort()  # abrupt, like a dropped network path
            up_writer.transport.abort()
