"""Prometheus metrics, one registry per engine (no module-level state)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    """The engine's counters and gauges."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.admitted = Counter("outlast_runs_admitted", "Runs admitted", registry=r)
        self.attached = Counter("outlast_runs_attached",
                                "Requests that attached to an existing run", registry=r)
        self.finished = Counter("outlast_runs_finished", "Runs ended, by final status",
                                ["status"], registry=r)
        self.takeovers = Counter("outlast_runs_taken_over",
                                 "Runs taken over from a dead attempt", registry=r)
        self.events = Counter("outlast_events_appended", "Events appended to run logs",
                              registry=r)
        self.executing = Gauge("outlast_runs_executing", "Runs executing in this process",
                               registry=r)
        self.subscribers = Gauge("outlast_subscribers", "Open event streams", registry=r)
        self.commit_seconds = Histogram("outlast_commit_seconds", "Group commit latency",
                                        registry=r)
        self.streams = Counter(
            "outlast_streams_opened", "Event streams opened, by kind: live (a running "
            "run from its start), replay (a final run from its start), reattach (after "
            "a Last-Event-ID or ?after=)", ["kind"], registry=r)
        self.webhook_deliveries = Counter(
            "outlast_webhook_deliveries", "Webhook delivery attempts by outcome: delivered, "
            "failed (retried later), expired (given up)", ["outcome"], registry=r)
        self.webhook_backlog = Gauge(
            "outlast_webhook_backlog", "Webhook deliveries owed (pending) in the store",
            registry=r)
        self.tokens = Counter(
            "outlast_tokens", "Model tokens the runs executing here reported, by agent and "
            "kind (input, output, reasoning, cached_input)", ["agent", "kind"], registry=r)
