"""One attempt to deliver one webhook over HTTP, bounded in every direction.

No redirect is followed (a 3xx is a failed attempt, retried like any other: a
receiver must not bounce signed notifications elsewhere); connecting and each
read are bounded by the timeout, the whole attempt by twice it (the caller's
``within``); at most
``MAX_RESPONSE_BYTES`` of the answer are read, to say what went wrong.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx

MAX_RESPONSE_BYTES = 4096


@dataclass(frozen=True)
class Attempt:
    """How one attempt ended: acknowledged (any 2xx), or why not."""

    ok: bool
    status: int | None  # the HTTP status, None when no answer came
    error: str | None  # a short reason, None when acknowledged


def client(timeout: float) -> httpx.AsyncClient:
    """The HTTP client deliveries share: no redirects, no environment proxies, bounded
    connect/read/write/pool times."""
    return httpx.AsyncClient(follow_redirects=False, trust_env=False,
                             timeout=httpx.Timeout(timeout),
                             limits=httpx.Limits(max_connections=64,
                                                 max_keepalive_connections=16))


async def attempt(http: httpx.AsyncClient, url: str, body: bytes, headers: dict[str, str],
                  within: float) -> Attempt:
    """POST ``body`` to ``url`` once, all of it ``within`` seconds; never raises for what
    the receiver does."""
    try:
        async with asyncio.timeout(within):
            async with http.stream("POST", url, content=body, headers=headers) as resp:
                head = await _head(resp)
    except TimeoutError:
        return Attempt(False, None, "timed out")
    except httpx.HTTPError as exc:
        return Attempt(False, None, f"{type(exc).__name__}: {str(exc)[:200]}".rstrip(": "))
    if 200 <= resp.status_code < 300:
        return Attempt(True, resp.status_code, None)
    reason = f"HTTP {resp.status_code}"
    if resp.is_redirect:
        reason += " (redirects are not followed)"
    elif head:
        reason += ": " + head.decode("utf-8", "replace")[:200]
    return Attempt(False, resp.status_code, reason)


async def _head(resp: httpx.Response) -> bytes:
    """At most MAX_RESPONSE_BYTES of the answer; the rest is never read."""
    out = b""
    async for chunk in resp.aiter_raw():
        out += chunk
        if len(out) >= MAX_RESPONSE_BYTES:
            break
    return out[:MAX_RESPONSE_BYTES]
