"""``AsyncClient``: the Python client of the HTTP surface (spec §3, §7).

Every request that is safe to repeat is retried across dropped connections and
restarts (``Backoff`` within ``retry_for`` seconds); ``events`` resumes a run's stream
with ``Last-Event-ID`` and yields each stored event exactly once.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import quote

import anyio
import httpx
from httpx_sse import EventSource

from outlast.client.errors import UNREACHABLE, OutlastError, from_response
from outlast.client.models import RunHandle, RunRecord, SeqEvent, Thread, ThreadSummary
from outlast.client.retry import Backoff

log = logging.getLogger("outlast.client")

T = TypeVar("T")
DEFAULT_URL = "http://127.0.0.1:8765"
TERMINAL = frozenset({"RUN_FINISHED", "RUN_ERROR"})
# Transport failures after which the request surely never reached the service.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout)


def _seg(value: str) -> str:
    """One path segment; the service validates ids, the client only escapes them."""
    return quote(value, safe="")


class AsyncClient:
    """An outlast service at ``url``, as ``token``'s principal.

    ``retry_for`` bounds how long a request (or a stream's reconnects) keeps trying
    after its last progress before raising ``OutlastError`` ``unreachable``;
    ``stream_timeout`` is how long a stream may stay silent (the service sends a
    keepalive every 15 s by default) before it counts as dropped.
    """

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, *,
                 timeout: float = 30.0, retry_for: float = 60.0,
                 stream_timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self.retry_for = retry_for
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(base_url=self.url, headers=headers,
                                       timeout=httpx.Timeout(timeout))
        self._stream_timeout = httpx.Timeout(timeout, read=stream_timeout)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    # -- runs ---------------------------------------------------------------------

    async def run(self, agent: str, input: Mapping[str, Any], *,
                  idempotency_key: str | None = None,
                  multitask: str | None = None) -> RunHandle:
        """Admit a run of ``agent`` for a ``RunAgentInput`` dict and return its handle as
        soon as it is admitted, without reading its stream (read it with ``events``).

        The idempotency key (default: the input's ``runId``) makes retries attach to
        the same run (G3); the stream is closed at once, so the request asks for
        ``on_disconnect=continue`` whatever the server's default (G1).
        """
        run_id, thread_id = input.get("runId"), input.get("threadId")
        if not isinstance(run_id, str) or not isinstance(thread_id, str):
            raise OutlastError("invalid_request", "the input needs string runId and threadId")
        if not input.get("messages") and not input.get("resume"):
            raise OutlastError("invalid_request", "an input without messages or resume runs "
                               "nothing (it would only hydrate the thread)")
        headers = {"Idempotency-Key": idempotency_key or run_id,
                   "Accept": "text/event-stream", "Outlast-On-Disconnect": "continue"}
        if multitask is not None:
            headers["Outlast-Multitask"] = multitask

        async def admit() -> RunHandle:
            async with self._http.stream("POST", f"/agents/{_seg(agent)}", json=dict(input),
                                         headers=headers) as resp:
                await _raise_for_status(resp)
                return RunHandle(resp.headers["Outlast-Run-Id"],
                                 resp.headers["Outlast-Thread-Id"],
                                 resp.headers.get("Outlast-Replayed") == "true")

        return await self._retrying(admit, idempotent=True)

    async def events(self, run_id: str, after: int = 0) -> AsyncGenerator[SeqEvent, None]:
        """Yield ``(seq, event)`` for every stored event of the run after ``after``,
        exactly once and in order, ending with the run's final event.

        Dropped connections and server restarts are survived: the stream is resumed
        after the last ``seq`` yielded. Frames without an ``id`` (a resumed stream's
        synthesized ``RUN_STARTED``, re-opened constructs, the copy of a finished run's
        final event) are not stored events and are never yielded (spec §4).
        """
        last = after
        backoff = Backoff(self.retry_for)
        path = f"/runs/{_seg(run_id)}/events"
        while True:
            headers = {"Last-Event-ID": str(last)} if last else {}
            ended = False
            try:
                async with self._http.stream(
                        "GET", path, headers={**headers, "Accept": "text/event-stream"},
                        params={"protocolVersion": "1.0"},  # stored events, unconverted
                        timeout=self._stream_timeout) as resp:
                    await _raise_for_status(resp)
                    # Closed here, not by the garbage collector, when the final event
                    # returns from inside the loop.
                    async with aclosing(EventSource(resp).aiter_sse()) as frames:
                        async for sse in frames:
                            if not sse.data:
                                continue  # a retry: line alone
                            event: dict[str, Any] = json.loads(sse.data)
                            # SSE keeps the last id for frames without one: only a larger
                            # id is a new stored event (exactly once, in order).
                            seq = int(sse.id) if sse.id else 0
                            if seq <= last:
                                # The finished run's tail: everything up to its final event
                                # was yielded already.
                                ended = ended or event.get("type") in TERMINAL
                                continue
                            last = seq
                            backoff.reset()
                            yield seq, event
                            if event.get("type") in TERMINAL:
                                return
                if ended:
                    return
                # A clean end without the final event: a draining server, or a run
                # that ended with no event after ``last``. The record tells which.
                record = await self.run_record(run_id)
                if record.final and record.last_seq <= last:
                    return
                reason = "the stream ended before the run's final event"
            except OutlastError as exc:
                if not exc.retryable:
                    raise
                reason = str(exc)
            except httpx.TransportError as exc:
                reason = f"connection lost ({type(exc).__name__})"
            await self._pause(backoff, reason, f"resuming run {run_id} after seq {last}")

    async def wait(self, run_id: str) -> RunRecord:
        """Wait until the run is final and return its record."""
        record = await self.run_record(run_id)
        while not record.final:
            async for _ in self.events(run_id, after=record.last_seq):
                pass
            record = await self.run_record(run_id)
        return record

    async def cancel(self, run_id: str, wait: bool = False) -> RunRecord:
        """Stop a run (idempotent, G6); with ``wait``, return once it is final."""
        params = {"wait": "true"} if wait else {}
        return RunRecord.from_json(
            await self._json("POST", f"/runs/{_seg(run_id)}/cancel", params=params))

    async def run_record(self, run_id: str) -> RunRecord:
        """The run's record."""
        return RunRecord.from_json(await self._json("GET", f"/runs/{_seg(run_id)}"))

    # -- threads ------------------------------------------------------------------

    async def thread(self, thread_id: str) -> Thread:
        """The thread's snapshot, pending interrupts and active run."""
        return Thread.from_json(await self._json("GET", f"/threads/{_seg(thread_id)}"))

    async def threads(self, status: str | None = None) -> list[ThreadSummary]:
        """All the caller's threads, newest first (every page), optionally by status."""
        out: list[ThreadSummary] = []
        cursor: str | None = None
        while True:
            params = {k: v for k, v in (("status", status), ("cursor", cursor)) if v}
            page = await self._json("GET", "/threads", params=params)
            out.extend(ThreadSummary.from_json(t) for t in page["threads"])
            cursor = page.get("nextCursor")
            if not cursor:
                return out

    async def runs(self, thread_id: str) -> list[RunRecord]:
        """All the thread's runs, newest first (every page)."""
        out: list[RunRecord] = []
        before: str | None = None
        while True:
            page = await self._json("GET", f"/threads/{_seg(thread_id)}/runs",
                                    params={"before": before} if before else {})
            out.extend(RunRecord.from_json(r) for r in page["runs"])
            before = page.get("nextBefore")
            if not before:
                return out

    async def answer(self, thread_id: str, approve: bool = True,
                     edited_args: Mapping[str, Any] | None = None, *,
                     interrupts: Sequence[str] | None = None,
                     run_id: str | None = None,
                     payload: Mapping[str, Any] | None = None) -> RunHandle:
        """Answer the thread's pending interrupts (default: every one) with an approval
        or a denial, ``edited_args`` replacing a tool call's arguments, or with
        ``payload`` as given (a tool cut off by a crash: ``{"answer": "happened",
        "result": ...}``, ``{"answer": "run_again"}`` or ``{"answer": "fail"}``);
        returns the continuation run's handle. ``run_id`` (default: a fresh one) names
        the continuation and makes retries of this request attach to it (G3)."""
        if interrupts is None:
            pending = (await self.thread(thread_id)).pending_interrupts
            if not pending:
                raise OutlastError("interrupt_not_pending",
                                   f"thread {thread_id} has no pending interrupts")
            doubt = payload is not None and "answer" in payload
            wrong = [i.id for i in pending if i.in_doubt != doubt]
            if wrong:
                # An approval's "yes" is not an answer about a crash, nor the reverse.
                raise OutlastError("invalid_answer", (
                    "not every pending interrupt asks whether a tool cut off by a crash "
                    "happened" if doubt else "a pending interrupt asks whether a tool cut "
                    "off by a crash happened: answer happened, run again or fail"
                ) + f" ({', '.join(wrong)}); name the ones to answer")
            interrupts = [i.id for i in pending]
        said: dict[str, Any] = {"approved": approve} if payload is None else dict(payload)
        if edited_args is not None:
            said["editedArgs"] = dict(edited_args)
        body = {"runId": run_id or f"answer-{uuid.uuid4().hex}",
                "resume": [{"interruptId": i, "status": "resolved", "payload": said}
                           for i in interrupts]}
        data = await self._json("POST", f"/threads/{_seg(thread_id)}/resume", json=body)
        run = data["run"]
        return RunHandle(run["runId"], run["threadId"], bool(data.get("replayed")))

    async def fork(self, thread_id: str, new_thread_id: str | None = None, *,
                   as_of: tuple[str, int] | None = None,
                   before_message_id: str | None = None) -> Thread:
        """Branch a thread at a safe boundary (default the latest; ``as_of`` a
        ``(run_id, seq)``; or just before ``before_message_id``) into a new thread."""
        body: dict[str, Any] = {}
        if new_thread_id is not None:
            body["threadId"] = new_thread_id
        if as_of is not None:
            body["asOf"] = {"runId": as_of[0], "seq": as_of[1]}
        if before_message_id is not None:
            body["beforeMessageId"] = before_message_id
        # Not idempotent without a chosen id: retried only when surely never sent.
        data = await self._json("POST", f"/threads/{_seg(thread_id)}/fork", json=body,
                                idempotent=new_thread_id is not None)
        return Thread.from_json(data.get("thread", data))

    # -- plumbing -----------------------------------------------------------------

    async def _json(self, method: str, path: str, *, idempotent: bool = True,
                    **kwargs: Any) -> Any:
        async def send() -> Any:
            resp = await self._http.request(method, path, **kwargs)
            await _raise_for_status(resp)
            return resp.json()

        return await self._retrying(send, idempotent=idempotent)

    async def _retrying(self, attempt: Callable[[], Awaitable[T]], *, idempotent: bool) -> T:
        backoff = Backoff(self.retry_for)
        while True:
            try:
                return await attempt()
            except OutlastError as exc:
                if not exc.retryable:
                    raise
                reason = str(exc)
            except httpx.TransportError as exc:
                if not idempotent and not isinstance(exc, NOT_SENT):
                    raise OutlastError(UNREACHABLE, f"connection to {self.url} lost "
                                       f"({type(exc).__name__}); the request may have "
                                       "been applied") from exc
                reason = f"cannot reach {self.url} ({type(exc).__name__})"
            await self._pause(backoff, reason, "retrying")

    async def _pause(self, backoff: Backoff, reason: str, then: str) -> None:
        delay = backoff.next_delay()
        if delay is None:
            raise OutlastError(UNREACHABLE, f"{reason}; gave up after {self.retry_for:g}s")
        log.info("%s; %s in %.1fs", reason, then, delay)
        await anyio.sleep(delay)


async def _raise_for_status(resp: httpx.Response) -> None:
    if resp.status_code >= 400:
        await resp.aread()
        raise from_response(resp)
