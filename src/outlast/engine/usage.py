"""Token usage: what an agent reports per model call, as the ledger keeps it, as the
run's final event and webhook carry it (AG-UI 1.0 ``TokenUsage``), and as Prometheus
counts it (by agent and kind only: a bounded label set)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ag_ui.core import TokenUsage
from ag_ui.core.token_usage import aggregate_token_usage

from outlast.engine.limits import Budget, of
from outlast.engine.metrics import Metrics
from outlast.store.base import UsageRecord
from outlast.tracing import TRACING

KINDS = ("input", "output", "reasoning", "cached_input")


def record_of(usage: TokenUsage) -> UsageRecord:
    """One model call's tokens as a ledger row."""
    total = usage.total_tokens if usage.total_tokens is not None else \
        (usage.input_tokens or 0) + (usage.output_tokens or 0)
    return UsageRecord(provider=usage.provider, model=usage.model,
                       input_tokens=usage.input_tokens or 0,
                       output_tokens=usage.output_tokens or 0, total_tokens=total,
                       reasoning_tokens=usage.reasoning_tokens or 0,
                       cached_tokens=usage.cached_input_tokens or 0)


def token_usage_of(row: UsageRecord) -> TokenUsage:
    """A ledger row (or sum) as AG-UI's ``TokenUsage``."""
    return TokenUsage(provider=row.provider, model=row.model, input_tokens=row.input_tokens,
                      output_tokens=row.output_tokens, total_tokens=row.total_tokens,
                      reasoning_tokens=row.reasoning_tokens or None,
                      cached_input_tokens=row.cached_tokens or None)


def wire(usage: list[TokenUsage]) -> list[dict[str, Any]]:
    """Usage summed per provider and model, in its wire shape (``RUN_FINISHED.usage``):
    the fields the agent reported (the ledger also keeps a total where none was)."""
    return [u.model_dump(mode="json", by_alias=True, exclude_none=True)
            for u in aggregate_token_usage(usage)]


def row_json(row: UsageRecord) -> dict[str, Any]:
    """A ledger sum in the HTTP API's shape (``GET /runs/{id}``, ``GET /usage``)."""
    out: dict[str, Any] = {"inputTokens": row.input_tokens, "outputTokens": row.output_tokens,
                           "totalTokens": row.total_tokens,
                           "reasoningTokens": row.reasoning_tokens,
                           "cachedInputTokens": row.cached_tokens, "calls": row.calls}
    if row.provider is not None:
        out["provider"] = row.provider
    if row.model is not None:
        out["model"] = row.model
    return out


def count(metrics: Metrics, agent: str, usage: TokenUsage) -> None:
    """Count one model call's tokens in ``outlast_tokens_total``."""
    for kind, value in zip(KINDS, (usage.input_tokens, usage.output_tokens,
                                   usage.reasoning_tokens, usage.cached_input_tokens),
                           strict=True):
        if value:
            metrics.tokens.labels(agent, kind).inc(value)


class RunUsage:
    """One execution's model calls: the list its final event sums, the ledger's rows
    (queued with its writes), the metrics, its principal's budget and the calls' spans
    (each from the end of what the run did before it: its start, a tool's end, the
    previous call)."""

    def __init__(self, services: Any, run: Any, channel: Any,
                 stop: Callable[[str], None]) -> None:
        self.services, self.channel = services, channel
        self.agent, self.run = run.agent, run.without_input()  # its ids, for spans
        self.calls: list[TokenUsage] = []  # over the run's attempts (AG-UI 1.0 usage)
        self.since = time.time()
        self.budget = Budget(services.store, run, of(services.settings, run.principal)
                             .tokens_per_day, self.tokens, stop)

    def tokens(self) -> int:
        """This run's tokens, over its attempts."""
        return sum(record_of(u).total_tokens for u in self.calls)

    def add(self, used: TokenUsage, finish_reason: str | None = None) -> None:
        """One model call's tokens, just reported."""
        self.calls.append(used)
        self.services.writer.usage(self.channel, record_of(used))  # the ledger
        count(self.services.metrics, self.agent, used)
        TRACING.model_call(self.run, self.since, used, finish_reason)
        self.since = time.time()
        self.budget.spent()  # past the principal's day's budget, the run stops here
