"""The checker's HTTP side: requests to an AG-UI endpoint and the SSE frames that come
back, each with its own ``id`` (or none) and when it arrived, every read bounded in time.

Frames are parsed here rather than by an SSE library on purpose: the SSE "last event
id" carries over to a frame without an ``id:`` line, and the binding tells a logged
event (with an id) from a synthesized one (without) by exactly that line."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

SSE = "text/event-stream"


@dataclass
class Frame:
    """One SSE data frame: its own ``id:`` (None without one), the event, its arrival."""

    id: str | None
    event: dict[str, Any]
    at: float = 0.0

    @property
    def type(self) -> str:
        return str(self.event.get("type", ""))

    @property
    def seq(self) -> int | None:
        """The id as an integer, or None when the frame has none or it is not one."""
        if self.id is None or not self.id.isdigit():
            return None
        return int(self.id)


@dataclass
class Exchange:
    """One request and what came back: the evidence a check reports."""

    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    frames: list[Frame] = field(default_factory=list)
    text: str = ""  # a non-stream answer's body (its first 2,000 characters)
    ended: bool = False  # the server ended the stream (not the checker, not a timeout)
    error: str | None = None  # a transport error or timeout, in words
    started: float = 0.0

    @property
    def events(self) -> list[dict[str, Any]]:
        return [f.event for f in self.frames]

    def json(self) -> Any:
        try:
            return json.loads(self.text)
        except ValueError:
            return None

    def evidence(self, frames: int = 12) -> dict[str, Any]:
        """What was sent and what came back, short enough to print."""
        sent: dict[str, Any] = {"request": f"{self.method} {self.url}"}
        if self.headers:
            sent["headers"] = self.headers
        if self.body is not None:
            sent["body"] = self.body
        got: dict[str, Any] = {"status": self.status}
        if self.frames:
            shown = self.frames if len(self.frames) <= frames else \
                self.frames[: frames - 2] + self.frames[-2:]
            got["frames"] = [f"{'id ' + f.id + ' ' if f.id is not None else ''}{summary(f.event)}"
                             for f in shown]
            if len(self.frames) > frames:
                got["frames"].insert(frames - 2, f"... {len(self.frames) - frames} more")
            got["count"] = len(self.frames)
            got["ended"] = "by the server" if self.ended else "by the checker"
        elif self.text:
            got["body"] = self.text[:500]
        if self.error:
            got["error"] = self.error
        return {**sent, "response": got}


def summary(event: dict[str, Any]) -> str:
    """An event in a few words: its type and the fields that say which."""
    parts = [str(event.get("type"))]
    for key in ("runId", "messageId", "toolCallId", "toolCallName"):
        if key in event:
            parts.append(f"{key}={event[key]}")
    if event.get("type") == "RUN_FINISHED" and event.get("outcome"):
        parts.append(f"outcome={(event['outcome'] or {}).get('type')}")
    if event.get("type") == "RUN_ERROR":
        parts.append(f"code={event.get('code')}")
    if "delta" in event and isinstance(event["delta"], str):
        parts.append(repr(event["delta"][:30]))
    return " ".join(parts)


def parse_block(block: str) -> tuple[str | None, str | None]:
    """(id, data) of one SSE block; data None for a comment or a ``retry:`` alone."""
    seq: str | None = None
    data: list[str] = []
    for line in block.split("\n"):
        line = line.rstrip("\r")
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id":
            seq = value
        elif name == "data":
            data.append(value)
    return seq, "\n".join(data) if data else None


class Wire:
    """HTTP to one server: JSON requests and SSE streams, every one bounded."""

    def __init__(self, client: httpx.AsyncClient, headers: dict[str, str]) -> None:
        self.client = client
        self.headers = headers  # e.g. Authorization, sent with every request

    async def request(self, method: str, url: str, *, body: Any = None,
                      headers: dict[str, str] | None = None,
                      within: float = 10.0) -> Exchange:
        """A plain request; the answer's body is kept as text."""
        ex = Exchange(method, url, dict(headers or {}), body, started=time.monotonic())
        try:
            async with asyncio.timeout(within):
                resp = await self.client.request(
                    method, url, json=body, headers={**self.headers, **(headers or {})})
            ex.status = resp.status_code
            ex.response_headers = dict(resp.headers)
            ex.text = resp.text[:2000]
        except TimeoutError:
            ex.error = f"no answer within {within:g} s"
        except httpx.HTTPError as exc:
            ex.error = f"{type(exc).__name__}: {exc}"
        return ex

    async def stream(self, method: str, url: str, *, body: Any = None,
                     headers: dict[str, str] | None = None, within: float = 30.0,
                     stop: Any = None, limit: int | None = None,
                     on_frame: Any = None) -> Exchange:
        """Read an SSE answer until the server ends it, ``stop(frame)`` is true, ``limit``
        frames came, or ``within`` seconds passed; then the connection is dropped.
        ``on_frame(exchange, frame)`` is awaited for each frame as it arrives."""
        ex = Exchange(method, url, dict(headers or {}), body, started=time.monotonic())
        sent = {"Accept": SSE, **self.headers, **(headers or {})}
        try:
            async with asyncio.timeout(within):
                async with self.client.stream(method, url, json=body, headers=sent) as resp:
                    ex.status = resp.status_code
                    ex.response_headers = dict(resp.headers)
                    if resp.status_code >= 300 or SSE not in resp.headers.get(
                            "content-type", ""):
                        ex.text = (await resp.aread()).decode("utf-8", "replace")[:2000]
                        ex.ended = True
                        return ex
                    buf = ""
                    async for chunk in resp.aiter_text():
                        buf += chunk.replace("\r\n", "\n")
                        while "\n\n" in buf:
                            block, buf = buf.split("\n\n", 1)
                            seq, data = parse_block(block)
                            if data is None:
                                continue
                            try:
                                event = json.loads(data)
                            except ValueError:
                                event = {"type": "<not JSON>", "data": data[:200]}
                            frame = Frame(seq, event if isinstance(event, dict) else
                                          {"type": "<not an object>"}, time.monotonic())
                            ex.frames.append(frame)
                            if on_frame is not None:
                                await on_frame(ex, frame)
                            if (stop is not None and stop(frame)) or \
                                    (limit is not None and len(ex.frames) >= limit):
                                return ex
                    ex.ended = True
        except TimeoutError:
            ex.error = f"stream not ended within {within:g} s"
        except httpx.HTTPError as exc:
            ex.error = f"{type(exc).__name__}: {exc}"
        return ex


FINAL = ("RUN_FINISHED", "RUN_ERROR")


def is_final(frame: Frame) -> bool:
    return frame.type in FINAL


def final_event(ex: Exchange) -> dict[str, Any] | None:
    """The stream's last event when it is a run's end."""
    if ex.frames and ex.frames[-1].type in FINAL:
        return ex.frames[-1].event
    return None
