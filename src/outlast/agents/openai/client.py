"""One streamed chat-completions request, with failures turned into clear run errors.

The upstream's detail (HTTP status, the start of its body) goes to the server log
at the default level with secrets stripped; the run's ``RUN_ERROR`` gets a safe
summary and one of three codes: ``model_unreachable``, ``model_error``,
``model_timeout``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx

from outlast.agent import AgentError
from outlast.agents.openai.wire import error_detail, scrub
from outlast.agents.sse import sse_data

log = logging.getLogger("outlast.agents.openai")
BODY_LOG_CHARS = 500


class ModelClient:
    """Streams ``POST {base_url}/chat/completions`` chunks.

    ``timeout`` bounds every read: a model server that stops sending for that long
    fails the run (``model_timeout``) instead of leaving it running."""

    def __init__(self, base_url: str, api_key: str | None, timeout: float) -> None:
        self.url = f"{base_url.rstrip('/')}/chat/completions"
        self.api_key = api_key
        self.timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> httpx.AsyncClient:
        # One pooled client per event loop: a new client per call costs more than a
        # first token (SSL context, pool), and a client cannot cross loops.
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = httpx.AsyncClient(timeout=self.timeout)
            self._loop = loop
        return self._client

    def _scrub(self, text: str) -> str:
        return scrub(text, self.api_key)

    async def chunks(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Every parsed chunk of the streamed reply, until ``[DONE]`` or the end."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            async with self._http().stream("POST", self.url, json=body,
                                           headers=headers) as resp:
                if resp.status_code >= 400:
                    await self._fail(resp)
                async for data in sse_data(resp):
                    if data.strip() == "[DONE]":
                        return
                    try:
                        chunk = json.loads(data)
                    except ValueError:
                        log.warning("model server %s sent a chunk that is not JSON: %s",
                                    self.url, self._scrub(data[:BODY_LOG_CHARS]))
                        raise AgentError("The model server sent a malformed reply.",
                                         code="model_error") from None
                    if isinstance(chunk, dict):
                        if isinstance(chunk.get("error"), dict | str):
                            detail = self._scrub(json.dumps(chunk["error"])[:BODY_LOG_CHARS])
                            log.warning("model server %s reported an error mid-reply: %s",
                                        self.url, detail)
                            raise AgentError("The model server failed mid-reply.",
                                             code="model_error")
                        yield chunk
        except httpx.TimeoutException as exc:
            connect = isinstance(exc, httpx.ConnectTimeout)
            log.warning("model server %s: %s after %.0f s", self.url, type(exc).__name__,
                        self.timeout.connect if connect else self.timeout.read)
            if connect:
                raise AgentError("The model server could not be reached (connect timeout).",
                                 code="model_unreachable") from None
            raise AgentError(f"The model server sent nothing for {self.timeout.read:g} s.",
                             code="model_timeout") from None
        except (httpx.ConnectError, httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            log.warning("model server %s could not be reached: %s", self.url,
                        type(exc).__name__)
            raise AgentError(
                f"The model server could not be reached ({type(exc).__name__}).",
                code="model_unreachable") from None
        except httpx.HTTPError as exc:
            log.warning("model server %s: the reply broke off (%s)", self.url,
                        type(exc).__name__)
            raise AgentError(f"The model server's reply broke off ({type(exc).__name__}).",
                             code="model_error") from None

    async def _fail(self, resp: httpx.Response) -> None:
        raw = await resp.aread()
        body = self._scrub(raw[:4 * BODY_LOG_CHARS].decode("utf-8", "replace"))
        log.warning("model server %s answered HTTP %d: %s", self.url, resp.status_code,
                    body[:BODY_LOG_CHARS])
        detail = error_detail(body)
        summary = f"The model server answered HTTP {resp.status_code}"
        summary += f": {detail[:200]}" if detail else "."
        raise AgentError(summary, code="model_error")
