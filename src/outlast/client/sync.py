"""``Client``: the blocking face of ``AsyncClient``.

There is one implementation: each ``Client`` runs an ``AsyncClient`` on a private
event loop in a background thread (an anyio blocking portal) and every method
forwards to it, so the two never drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Future
from contextlib import ExitStack
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from outlast.client.aio import DEFAULT_URL, AsyncClient
from outlast.client.models import SeqEvent

P = ParamSpec("P")
T = TypeVar("T")


def _blocking(method: Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]],
              ) -> Callable[Concatenate[Client, P], T]:
    """``AsyncClient.method`` as a blocking ``Client`` method."""

    def call(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        async def forward() -> T:
            return await method(self._async, *args, **kwargs)

        return self._wait(self._portal.start_task_soon(forward))

    call.__name__ = method.__name__
    call.__doc__ = method.__doc__
    return call


class Client:
    """A blocking client with the same methods and arguments as ``AsyncClient``."""

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None,
                 **options: Any) -> None:
        self._stack = ExitStack()
        self._portal: BlockingPortal = self._stack.enter_context(start_blocking_portal())

        async def make() -> AsyncClient:
            return AsyncClient(url, token, **options)

        self._async = self._portal.call(make)
        self.url = self._async.url

    def close(self) -> None:
        """Close the connections and stop the background loop."""
        try:
            self._portal.call(self._async.aclose)
        finally:
            self._stack.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @staticmethod
    def _wait(future: Future[T]) -> T:
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. Ctrl-C while waiting: stop the task on the loop too
            raise

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

        async def make_lock() -> anyio.Lock:
            return anyio.Lock()

        # A step cancelled by an interrupted caller may still be unwinding when the
        # stream is closed: the lock makes the close wait for it.
        lock = self._portal.call(make_lock)

        async def step() -> SeqEvent:
            async with lock:
                return await stream.__anext__()

        async def close() -> None:
            async with lock:
                await stream.aclose()

        try:
            while True:
                try:
                    item = self._wait(self._portal.start_task_soon(step))
                except StopAsyncIteration:
                    return
                yield item
        finally:
            self._portal.call(close)
