"""Metrics that mean something: a real ``outlast serve`` that takes over a run a killed
process left, streams live, replays and reattaches, delivers a webhook after a failed
attempt and counts a run's tokens observes every metric it declares; and the Grafana
dashboard in ``ops/grafana/`` reads only names the server exports, and all of them."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from outlast.engine.metrics import Metrics
from tests.support.agents import AGENT_ENV, SPEND_AGENT
from tests.support.runs import uid, wait_final
from tests.support.server import ServerProcess, collect, demo_input, wait_for
from tests.support.webhook_receiver import Answer, Receiver

DASHBOARD = Path(__file__).resolve().parents[2] / "ops" / "grafana" / "outlast.json"
SECRET = "whsec_" + base64.b64encode(b"thirty-two bytes of webhook key!").decode()


def declared() -> dict[str, str]:
    """Every metric family the server declares, with its type."""
    return {m.name: m.type for m in Metrics().registry.collect()}


def scrape(text: str) -> dict[str, list[Any]]:
    """The samples of a ``/metrics`` page by family."""
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def family_of(series: str) -> str:
    for suffix in ("_total", "_bucket", "_count", "_sum", "_created"):
        if series.endswith(suffix):
            return series.removesuffix(suffix)
    return series


async def test_every_declared_metric_is_observed(server_factory: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    first: ServerProcess = server_factory("--lease-ttl", "30", data_dir=data)
    slow = uid("slow")
    async with first.client() as c:
        await collect(c, "POST", "/agents/demo", limit=2,
                      json=demo_input(uid("t"), slow, steps=2, step_delay_ms=300))
    first.kill()

    def fail_once(_request: Any, earlier: int) -> Answer:
        return Answer(503 if earlier == 0 else 204)

    receiver = Receiver(fail_once).start()
    try:
        server: ServerProcess = server_factory(
            "--agent", SPEND_AGENT, "--webhook", receiver.url(), "--webhook-secret", SECRET,
            "--webhook-retry-base", "0.5", data_dir=data, env=AGENT_ENV)
        async with server.client() as c:
            assert (await wait_final(c, slow))["attempts"] == 2  # taken over at start
            # A live stream, watched while the run executes.
            live = uid("r")
            async with c.stream("POST", "/agents/demo", json=demo_input(
                    uid("t"), live, steps=2, step_delay_ms=400)) as resp:
                async for line in resp.aiter_lines():
                    if line.startswith("data:") and "TOOL_CALL_START" in line:
                        during = scrape((await c.get("/metrics")).text)
                        break
            assert during["outlast_runs_executing"][0].value >= 1
            assert during["outlast_subscribers"][0].value >= 1
            await wait_final(c, live)
            # A replay of the final run, and a reattach after its third event.
            await collect(c, "GET", f"/runs/{live}/events", params={"follow": "false"})
            await collect(c, "GET", f"/runs/{live}/events", headers={"Last-Event-ID": "3"})
            # Tokens, and a webhook whose first attempt fails (owed meanwhile).
            spending = {**demo_input(uid("t"), uid("r")), "forwardedProps": {"calls": [
                {"model": "m", "inputTokens": 7, "outputTokens": 3}]}}
            await collect(c, "POST", "/agents/spend", json=spending)
            # Its retry attaches to it (G3).
            retry, _ = await collect(c, "POST", "/agents/spend", json=spending)
            assert retry.headers["Outlast-Replayed"] == "true"

            async def owed() -> bool:
                page = scrape((await c.get("/metrics")).text)
                return page["outlast_webhook_backlog"][0].value >= 1

            await wait_for(owed)

            async def delivered() -> dict[str, list[Any]] | None:
                page = scrape((await c.get("/metrics")).text)
                outcomes = {s.labels.get("outcome") for s in
                            page.get("outlast_webhook_deliveries", []) if s.value > 0}
                return page if {"failed", "delivered"} <= outcomes else None

            page = await wait_for(delivered, timeout=30)
    finally:
        receiver.stop()
    for name, kind in declared().items():
        samples = [s for s in page[name] if not s.name.endswith("_created")]
        assert samples, f"{name} is not exported"
        if kind in ("counter", "histogram"):
            assert any(s.value > 0 for s in samples), f"{name} was never observed"
    kinds = {s.labels["kind"] for s in page["outlast_streams_opened"] if s.value > 0}
    assert kinds == {"live", "replay", "reattach"}
    assert {s.labels["status"] for s in page["outlast_runs_finished"] if s.value > 0} >= \
        {"succeeded"}
    tokens = {(s.labels["agent"], s.labels["kind"]): s.value
              for s in page["outlast_tokens"] if s.name.endswith("_total")}
    assert tokens == {("spend", "input"): 7.0, ("spend", "output"): 3.0}


def test_the_dashboard_reads_every_metric_and_only_those() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert exprs and all(isinstance(e, str) for e in exprs)
    read = {family_of(n) for e in exprs for n in re.findall(r"\boutlast_[a-z_]+", e)}
    templated = dashboard["templating"]["list"]
    read |= {family_of(n) for v in templated for n in
             re.findall(r"\boutlast_[a-z_]+", str(v.get("query", "")))}
    assert read == set(declared()), (read ^ set(declared()))
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_metrics_needs_a_token_when_tokens_are_configured(server_factory: Any,
                                                          tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("ops:tok-ops-0123456789\n")
    server: ServerProcess = server_factory("--tokens-file", str(tokens))
    assert httpx.get(f"{server.url}/metrics", timeout=10).status_code == 401
    ok = httpx.get(f"{server.url}/metrics", timeout=10,
                   headers={"Authorization": "Bearer tok-ops-0123456789"})
    assert ok.status_code == 200 and "outlast_runs_admitted_total" in ok.text
