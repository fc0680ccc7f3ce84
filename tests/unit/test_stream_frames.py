"""SSE frame encoding, the pre-1.0 cancelled ending, and the bounded live feed (G10)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

from outlast.engine.hub import CACHE_EVENTS, POKE_SECONDS, Hub, RunFeed
from outlast.http.frames import SSE_TEMPLATE, frame, frames_of, retry_preamble
from outlast.http.streams import is_legacy, legacy_body
from outlast.store.base import StoredEvent
from tests.support.server import parse_sse


def stored(seq: int) -> StoredEvent:
    return StoredEvent(seq, False, json.dumps({"type": "TEXT_MESSAGE_CONTENT",
                                               "messageId": "m", "delta": str(seq)}))


def test_frames_carry_the_seq_as_id_and_synthesized_frames_none() -> None:
    body = '{"type":"RUN_STARTED","threadId":"t","runId":"r"}'
    assert frame(7, body) == f"id: 7\ndata: {body}\n\n"
    assert frame(None, body) == f"data: {body}\n\n"
    [logged, synthesized] = parse_sse(frame(7, body) + ": keepalive\n\n" + frame(None, body))
    assert (logged.id, synthesized.id) == (7, None)
    assert logged.event == synthesized.event == json.loads(body)


def test_a_cancelled_run_ends_with_run_error_for_clients_before_1_0() -> None:
    cancelled = json.dumps({"type": "RUN_FINISHED", "threadId": "t", "runId": "r",
                            "outcome": {"type": "cancelled"}, "timestamp": 5})
    legacy = json.loads(legacy_body(cancelled))
    assert legacy["type"] == "RUN_ERROR"
    assert legacy["code"] == "cancelled" and legacy["timestamp"] == 5
    assert legacy["message"]
    # Anything else passes unchanged, even when it mentions cancellation.
    for body in (
        json.dumps({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}),
        json.dumps({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m",
                    "delta": "RUN_FINISHED was cancelled"}),
        json.dumps({"type": "RUN_FINISHED", "threadId": "t", "runId": "r",
                    "outcome": {"type": "interrupt", "interrupts": [],
                                "note": "cancelled"}}),
    ):
        assert legacy_body(body) == body


def test_clients_without_a_1_x_protocol_version_are_legacy() -> None:
    # Absent (inputs made before AG-UI carried a version) or 0.x: before 1.0.
    assert is_legacy(None) and is_legacy("") and is_legacy("  ")
    assert is_legacy("0.3.1") and is_legacy("0.9") and is_legacy(" 0.3 ")
    # 1.0 and later speak the cancelled outcome.
    assert not is_legacy("1.0") and not is_legacy("1.2.3") and not is_legacy("2") \
        and not is_legacy(" 1.0")
    # A declaration that cannot be read is treated as newer (AG-UI's versioning rules),
    # even one spelled with another script's digits, which int() would read as 0.
    assert not is_legacy("next") and not is_legacy("v0.3") and not is_legacy("\u0660.3")


def test_frames_and_the_database_template_spell_a_logged_event_alike() -> None:
    prefix, middle, suffix = SSE_TEMPLATE
    assert frame(12, "{}") == f"{prefix}12{middle}{{}}{suffix}"
    page = [StoredEvent(12, False, "{}"), StoredEvent(13, True, '{"a":1}')]
    assert frames_of(page) == frame(12, "{}") + frame(13, '{"a":1}')
    assert retry_preamble().startswith("retry: ") and retry_preamble().endswith("\n\n")


def test_the_live_cache_holds_the_latest_commit_alone_however_many_events_pass() -> None:
    feed = RunFeed()
    total = CACHE_EVENTS * 20
    for seq in range(1, total + 1):
        feed.advance([stored(seq)], seq, False)
    # Commits of one event each (a model's pace): the latest one is kept, nothing older.
    assert [e.seq for e in feed.cache] == [total]
    assert feed.last_seq == total
    # A subscriber at the end of the previous commit reads the cache; one further
    # behind reads the log (None).
    assert [e.seq for e in feed.cached_after(total - 1, 1000) or []] == [total]
    assert feed.cached_after(total - 2, 1000) is None
    # At the live edge the cache answers "nothing newer" itself: no read of the log.
    assert feed.cached_after(total, 10) == []
    feed.advance([stored(s) for s in range(total + 1, total + 11)], total + 10, False)
    page = feed.cached_after(total + 2, 5)
    assert page is not None and [e.seq for e in page] == list(range(total + 3, total + 8))
    assert feed.cached_after(total - 1, 5) is None  # the previous commit is the log's


def test_the_latest_commit_stays_cached_whole_up_to_the_count_limit() -> None:
    feed = RunFeed()
    feed.advance([stored(s) for s in range(1, 501)], 500, False)
    assert len(feed.cache) == 500  # subscribers at the edge
    feed.advance([stored(s) for s in range(501, 501 + CACHE_EVENTS * 2)],
                 500 + CACHE_EVENTS * 2, False)
    assert len(feed.cache) == CACHE_EVENTS
    assert feed.cache[0].seq == 501 + CACHE_EVENTS and feed.cache[-1].seq == 500 + CACHE_EVENTS * 2


def test_a_gap_in_published_events_restarts_the_cache() -> None:
    feed = RunFeed()
    feed.advance([stored(1), stored(2)], 2, False)
    feed.advance([stored(5)], 5, False)  # 3 and 4 came from another process
    assert [e.seq for e in feed.cache] == [5]
    assert feed.cached_after(2, 10) is None  # the log has 3 and 4
    assert [e.seq for e in feed.cached_after(4, 10) or []] == [5]
    # Another process's hint moved the edge past what this one published: read the log.
    feed.advance([], 7, False)
    assert feed.cached_after(5, 10) is None
    assert feed.cached_after(7, 10) == []


async def test_waiting_on_a_feed_wakes_on_progress_and_is_immediate_when_behind() -> None:
    feed = RunFeed()
    await feed.wait(0, 0.01)  # nothing yet, and nothing comes: the timeout
    waiter = asyncio.create_task(feed.wait(0, 5.0))
    await asyncio.sleep(0)
    started = time.monotonic()
    feed.advance([stored(1)], 1, False)
    await waiter
    assert time.monotonic() - started < 1.0
    started = time.monotonic()
    await feed.wait(0, 5.0)  # already past 0
    await feed.wait(1, 0.01)  # not past 1: returns after its timeout
    feed.advance([], 1, True)
    await feed.wait(1, 5.0)  # final: returns at once
    assert time.monotonic() - started < 1.0


async def test_a_stream_waiting_without_a_timer_is_woken_by_the_sweep_only_when_quiet() -> None:
    hub = Hub()
    feed = hub.acquire(1)
    feed.advance([stored(1)], 1, False)
    waiter = asyncio.create_task(feed.wait(1))
    await asyncio.sleep(0)
    hub.poke_quiet()  # it just moved: not quiet, nobody is woken
    await asyncio.sleep(0)
    assert not waiter.done()
    feed.moved_at -= POKE_SECONDS
    hub.poke_quiet()  # quiet for POKE_SECONDS: woken with nothing new (the log is read)
    await asyncio.wait_for(waiter, 5.0)
    assert feed.last_seq == 1
    hub.release(1)


def test_a_feed_lives_exactly_as_long_as_its_holders() -> None:
    hub = Hub()
    writer = hub.acquire(1)
    with hub.watch(1) as watched:
        assert watched is writer and len(hub) == 1
    assert 1 in hub  # the writer still holds it
    hub.publish(1, [StoredEvent(1, True, "{}")], 1, False)
    assert writer.last_seq == 1
    hub.release(1)
    assert len(hub) == 0
    hub.publish(1, [StoredEvent(2, True, "{}")], 2, True)  # nobody holds it: nothing kept
    hub.hint(1, 3, False)
    assert len(hub) == 0
    hub.release(1)  # an unpaired release is harmless
    assert len(hub) == 0


async def test_one_commit_wakes_every_waiter_and_a_cancelled_wait_is_let_go() -> None:
    feed = RunFeed()
    waiters = [asyncio.create_task(feed.wait(0)) for _ in range(3)]
    gone = asyncio.create_task(feed.wait(0, 5.0))
    await asyncio.sleep(0)
    gone.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await gone
    feed.advance([stored(1)], 1, False)
    await asyncio.wait_for(asyncio.gather(*waiters), 5.0)
    later = asyncio.create_task(feed.wait(1))  # the next generation waits anew
    await asyncio.sleep(0)
    assert not later.done()
    feed.advance([stored(2)], 2, False)
    await asyncio.wait_for(later, 5.0)
