"""How an SSE frame is spelled: the one owner of the stream's wire format (spec §4).

Logged events are ``id: <seq>`` + ``data: <event JSON>``; synthesized events (the
``RUN_STARTED`` of a stream that starts mid-run, re-opened constructs, hydration
snapshots) carry no ``id``, so a reconnect resumes after the last logged one. The
database assembles replay pages with ``SSE_TEMPLATE``; everything else uses ``frame``.
"""

from __future__ import annotations

from collections.abc import Iterable

from outlast.protocol.events import Event
from outlast.protocol.jsonutil import dumps

# Prefix before the seq, between seq and body, after the body: handed to the store
# so that frames it concatenates are spelled exactly as ``frame`` spells them.
SSE_TEMPLATE = ("id: ", "\ndata: ", "\n\n")

RETRY_MS = 1000  # browsers reconnect this quickly after a dropped stream


def frame(seq: int | None, body: str) -> str:
    """One SSE frame of an encoded event; ``seq`` None for a synthesized one."""
    if seq is None:
        return f"data: {body}\n\n"
    return f"{SSE_TEMPLATE[0]}{seq}{SSE_TEMPLATE[1]}{body}{SSE_TEMPLATE[2]}"


def frames_of(events: Iterable[tuple[int, bool, str]]) -> str:
    """The frames of logged events (``StoredEvent``s), spelled as ``frame`` spells them,
    in one string."""
    head, sep, tail = SSE_TEMPLATE
    return "".join([f"{head}{seq}{sep}{body}{tail}" for seq, _, body in events])


def synthesized(event: Event) -> str:
    """The frame of an event the stream makes up (never logged, so no ``id``)."""
    return frame(None, dumps(event))


def retry_preamble() -> str:
    """The first frame of every stream: how soon a browser should reconnect."""
    return f"retry: {RETRY_MS}\n\n"


def is_preamble(chunk: str) -> bool:
    """True for the chunk ``retry_preamble`` spells (a nested stream drops it)."""
    return chunk.startswith("retry:")


KEEPALIVE = b": keepalive\n\n"
"""The comment written while a stream is quiet."""
