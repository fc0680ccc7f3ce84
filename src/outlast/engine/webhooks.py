"""Webhooks owed for a run's end (G12): what is sent, and the loop that sends it.

``owed`` builds the outbox rows that the run's final write commits together with
the end itself, so a committed end always has its notifications recorded. The
``Deliveries`` loop of every process claims due rows (one atomic statement: no
two processes hold the same delivery), signs and POSTs them, and settles each
attempt fenced by its claim: acknowledged by any 2xx, otherwise due again after an
exponential backoff with jitter, until ``--webhook-max-age`` has passed. A process
that dies mid-attempt leaves the row leased; the lease runs out and another
process (or this one restarted) tries again, so delivery is at least once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
import uuid
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from outlast.config import Settings, webhook_key, webhook_url_problem, within_prefix
from outlast.engine.metrics import Metrics
from outlast.errors import InvalidRequest, StoreUnavailable
from outlast.protocol.jsonutil import dumps
from outlast.protocol.message_index import tool_calls
from outlast.store.base import FinishWrite, RunRecord, Store, WebhookRecord, WebhookWrite
from outlast.webhooks import delivery
from outlast.webhooks.signing import signed_headers

log = logging.getLogger("outlast.webhooks")

EVENT_TYPES = {"succeeded": "run.succeeded", "failed": "run.failed",
               "cancelled": "run.cancelled", "interrupted": "run.interrupted"}
POLL = 5.0  # seconds between looks for rows other processes recorded and left behind
IN_FLIGHT = 32  # attempts one process makes at once
MAX_URL = 2048


def check_request_webhook(settings: Settings, url: str) -> str:
    """A request's ``Outlast-Webhook``, if an allowed prefix admits it; InvalidRequest
    (422 at admission, before anything is stored) otherwise."""
    problem = webhook_url_problem(url, prefix=False)
    if problem is None and len(url) > MAX_URL:
        problem = f"a webhook URL is at most {MAX_URL} characters"
    if problem is not None:
        raise InvalidRequest(f"Outlast-Webhook: {problem}", header="Outlast-Webhook")
    if not any(within_prefix(url, prefix) for prefix in settings.webhook_allow):
        raise InvalidRequest("Outlast-Webhook must start with a prefix the server allows "
                             "(--webhook-allow)", header="Outlast-Webhook")
    return url


def admissible(settings: Settings, url: str) -> bool:
    """Whether a stored delivery may still go to ``url``: one of ``--webhook``, or
    under a ``--webhook-allow`` prefix now. Checked again before every attempt, so a
    row admitted under a prefix since removed (or by an older, laxer check) is not sent."""
    if url in settings.webhooks:
        return True
    return webhook_url_problem(url, prefix=False) is None and any(
        within_prefix(url, prefix) for prefix in settings.webhook_allow)


def owed(settings: Settings, run: RunRecord, fin: FinishWrite,
         messages: list[dict[str, Any]]) -> list[WebhookWrite]:
    """The deliveries a run's end owes: one per ``--webhook`` and one for the request's
    own ``Outlast-Webhook``, all with the same body, each with its own stable id."""
    if settings.webhook_secret is None:
        return []  # nothing could sign them (and nothing can ask for them: see config)
    urls = list(settings.webhooks)
    own = run.options.get("webhook")
    if isinstance(own, str) and own:
        urls.append(own)
    if not urls:
        return []
    now = time.time()
    kind = EVENT_TYPES[fin.status]
    body = dumps(payload(run, fin, messages, now))
    return [WebhookWrite(id=f"msg_{uuid.uuid4().hex}", url=url, type=kind, body=body,
                         expires_at=now + settings.webhook_max_age)
            for url in dict.fromkeys(urls)]


def payload(run: RunRecord, fin: FinishWrite, messages: list[dict[str, Any]],
            now: float) -> dict[str, Any]:
    """The body of a run's end event (spec §6). An interrupt's carries what a phone
    notification needs to offer approve or deny: each interrupt with the tool call it
    holds (name and arguments, from the transcript), and where the answer goes."""
    interrupts = [json.loads(body) for _, body, _ in fin.interrupts]
    calls = {c.get("id"): c for m in messages for c in tool_calls(m)}
    data: dict[str, Any] = {
        "runId": run.id, "threadId": run.thread_id, "agent": run.agent,
        "status": fin.status, "outcome": fin.outcome, "error": fin.error,
        "interrupts": [_interrupt(i, calls) for i in interrupts],
        "usage": fin.usage or [],  # the run's tokens over its attempts (AG-UI 1.0)
    }
    if fin.status == "interrupted":
        data["answer"] = {"method": "POST",
                          "path": f"/threads/{quote(run.thread_id, safe='')}/resume"}
    stamp = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")
    return {"type": EVENT_TYPES[fin.status], "timestamp": stamp.replace("+00:00", "Z"),
            "data": data}


def _interrupt(item: dict[str, Any], calls: dict[Any, dict[str, Any]]) -> dict[str, Any]:
    call = calls.get(item.get("toolCallId"))
    if call is None:
        return item
    function = call.get("function") or {}
    arguments: Any = function.get("arguments")
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
    return {**item, "toolCall": {"name": function.get("name"), "arguments": arguments}}


def backoff(attempts: int, base: float, cap: float) -> float:
    """The delay after the ``attempts``-th failed attempt: doubling from ``base`` up to
    ``cap``, with jitter (so receivers coming back are not hit by every sender at once)."""
    delay = min(cap, base * 2.0 ** min(max(attempts - 1, 0), 60))
    return delay * random.uniform(0.5, 1.0)


def where(url: str) -> str:
    """A URL as logs show it: scheme, host and path, never credentials or a query."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


class Deliveries:
    """This process's delivery loop: wakes when an end with webhooks commits here, and
    polls for the rest (rows left by a process that died, retries coming due)."""

    def __init__(self, store: Store, settings: Settings, instance: str,
                 metrics: Metrics) -> None:
        self.store = store
        self.settings = settings
        self.instance = instance
        self.metrics = metrics
        secret = settings.webhook_secret
        self._key = None if secret is None else webhook_key(secret.get_secret_value())
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._attempts: set[asyncio.Task[None]] = set()
        self._http: httpx.AsyncClient | None = None

    @property
    def lease(self) -> float:
        """How long a claim holds a delivery: longer than an attempt can take."""
        return 2 * self.settings.webhook_timeout + max(10.0, self.settings.webhook_timeout)

    def start(self) -> None:
        """Start delivering (only with a secret: nothing is sent unsigned)."""
        if self._key is None:
            return
        self._http = delivery.client(self.settings.webhook_timeout)
        self._task = asyncio.create_task(self._loop(), name="outlast-webhooks")

    def wake(self) -> None:
        """Look for due deliveries now (a run's end with webhooks just committed)."""
        self._wake.set()

    async def stop(self) -> None:
        """Stop the loop and abandon attempts in flight, handing their rows back so the
        next process retries them at once."""
        tasks = [t for t in (self._task, *self._attempts) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._task is not None:
            try:
                await self.store.webhook_release(self.instance)
            except Exception:
                log.exception("could not hand back webhooks in flight (their lease expires)")
        if self._http is not None:
            await self._http.aclose()
        self._task = self._http = None

    async def _loop(self) -> None:
        if self.store.exclusive:
            # The data-directory lock proves the previous process gone: what it had in
            # flight is due now, not when its lease runs out.
            try:
                await self.store.webhook_release(self.instance, others=True)
            except Exception:
                log.exception("could not take over webhooks in flight (their lease expires)")
        while True:
            self._wake.clear()  # before looking: a wake during the look is kept
            try:
                delay = await self._round()
            except StoreUnavailable:
                delay = 1.0  # said once by the OutageWatch; deliveries wait for the store
            except Exception:
                log.exception("webhook delivery failed; retrying")
                delay = 1.0
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()

    async def _round(self) -> float:
        """Claim what is due and start its attempts; how long until the next look."""
        free = IN_FLIGHT - len(self._attempts)
        claimed: list[WebhookRecord] = []
        if free > 0:
            claimed = await self.store.webhook_claim(self.instance, time.time() + self.lease,
                                                     free)
        for hook in claimed:
            if hook.status == "expired":
                log.warning("webhook %s (%s) expired after %d attempts", hook.id,
                            where(hook.url), hook.attempts)
                self.metrics.webhook_deliveries.labels("expired").inc()
                continue
            task = asyncio.create_task(self._attempt(hook), name=f"webhook:{hook.id}")
            self._attempts.add(task)
            task.add_done_callback(self._attempt_done)
        if claimed and len(claimed) == free:
            return 0.0  # maybe more is due
        if free <= len(claimed):
            return POLL  # full: an attempt's end wakes the loop
        due, backlog = await self.store.webhook_outlook()
        self.metrics.webhook_backlog.set(backlog)
        if due is None:
            return POLL
        return min(POLL, max(0.05, due - time.time()))

    def _attempt_done(self, task: asyncio.Task[None]) -> None:
        self._attempts.discard(task)
        self.wake()

    async def _attempt(self, hook: WebhookRecord) -> None:
        assert self._key is not None and self._http is not None
        body = hook.body.encode()
        headers = signed_headers(self._key, hook.id, int(time.time()), body)
        refused = not admissible(self.settings, hook.url)
        result = delivery.Attempt(False, None, "refused: the URL is no longer allowed "
                                  "(--webhook, --webhook-allow)") if refused else \
            await delivery.attempt(self._http, hook.url, body, headers,
                                   2 * self.settings.webhook_timeout)
        now = time.time()
        if refused:
            status, next_at = "expired", now
        elif result.ok:
            status, next_at = "delivered", now
        else:
            s = self.settings
            next_at = now + backoff(hook.attempts, s.webhook_retry_base, s.webhook_retry_max)
            status = "expired" if next_at >= hook.expires_at else "pending"
        try:
            held = await self.store.webhook_settle(
                hook.wid, self.instance, hook.attempts, status=status, next_at=next_at,
                last_status=result.status, last_error=result.error)
        except StoreUnavailable:
            return  # its lease expires and it is tried again, once the store writes
        except Exception:
            log.exception("webhook %s: could not record attempt %d (its lease expires and "
                          "it is tried again)", hook.id, hook.attempts)
            return
        self.metrics.webhook_deliveries.labels(
            "delivered" if result.ok else "failed" if status == "pending" else "expired").inc()
        if not held:
            log.warning("webhook %s: attempt %d outlived its lease", hook.id, hook.attempts)
        elif result.ok:
            log.info("webhook %s %s delivered to %s (attempt %d)", hook.id, hook.type,
                     where(hook.url), hook.attempts)
        else:
            log.warning("webhook %s to %s: attempt %d failed (%s); %s", hook.id,
                        where(hook.url), hook.attempts, result.error,
                        "expired" if status == "expired" else
                        f"next in {next_at - now:.1f} s")
