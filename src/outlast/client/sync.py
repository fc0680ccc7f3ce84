"""``Client``: the blocking face of ``AsyncClient``.

There is one implementation: each ``Client`` runs an ``AsyncClient`` on a private
event loop in a background thread and every method forwards to it, so the two never
drift apart. The thread is a daemon: a client that is never closed does not keep
the interpreter from exiting.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from outlast.client.aio import DEFAULT_URL, AsyncClient
from outlast.client.models import SeqEvent

P = ParamSpec("P")
T = TypeVar("T")


class _Loop:
    """An event loop running in its own daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                       name="outlast-client")
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result."""
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. Ctrl-C while waiting: the task stops too
            raise

    def stop(self) -> None:
        # Finalize async generators first (an SSE reader left by a ``break``): once the
        # loop is closed, the garbage collector's finalizer would schedule their close
        # on a dead loop ("Task was destroyed but it is pending!" at exit).
        asyncio.run_coroutine_threadsafe(self.loop.shutdown_asyncgens(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


def _blocking(method: Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]],
              ) -> Callable[Concatenate[Client, P], T]:
    """``AsyncClient.method`` as a blocking ``Client`` method."""

    def call(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._loop.run(method(self._async, *args, **kwargs))

    call.__name__ = method.__name__
    call.__doc__ = method.__doc__
    return call


class Client:
    """A blocking client with the same methods and arguments as ``AsyncClient``."""

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None,
                 **options: Any) -> None:
        self._loop = _Loop()

        async def make() -> AsyncClient:
            return AsyncClient(url, token, **options)

        try:
            self._async = self._loop.run(make())
        except BaseException:
            self._loop.stop()
            raise
        self.url = self._async.url

    def close(self) -> None:
        """Close the connections and stop the background loop."""
        try:
            self._loop.run(self._async.aclose())
        finally:
            self._loop.stop()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    run = _blocking(AsyncClient.run)
    wait = _blocking(AsyncClient.wait)
    cancel = _blocking(AsyncClient.cancel)
    run_record = _blocking(AsyncClient.run_record)
    thread = _blocking(AsyncClient.thread)
    threads = _blocking(AsyncClient.threads)
    runs = _blocking(AsyncClient.runs)
    answer = _blocking(AsyncClient.answer)
    fork = _blocking(AsyncClient.fork)

    def events(self, run_id: str, after: int = 0) -> Iterator[SeqEvent]:
        """See ``AsyncClient.events``."""
        stream = self._async.events(run_id, after)
        # A step cancelled by an interrupted caller may still be unwinding when the
        # stream is closed: the lock makes the close wait for it.
        lock = asyncio.Lock()

        async def step() -> SeqEvent:
            async with lock:
                return await stream.__anext__()

        async def close() -> None:
            async with lock:
                await stream.aclose()

        try:
            while True:
                try:
                    item = self._loop.run(step())
                except StopAsyncIteration:
                    return
                yield item
        finally:
            self._loop.run(close())
