"""The usage ledger: every model call's tokens, as an agent reports them, are kept with
the run's events; a run shows them on its record, its final event and its webhook;
``GET /usage`` sums them per principal, per model and per thread over a window (another
principal's only for ``--admin``); Prometheus counts them by agent and kind. On SQLite
and PostgreSQL; bad queries get 422 and foreign ones 403, changing nothing.

A crashed attempt's tokens stay counted: tests/integration/test_chat_agent.py,
``test_sigkill_in_the_tool_loop_resumes_with_one_answer``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook

from outlast.agent import Agent, Capabilities, RunContext
from outlast.http.auth import Principals
from tests.support.inprocess import InProcess, in_process_server
from tests.support.runs import stored_log, uid, wait_final
from tests.support.server import collect, wait_for
from tests.support.webhook_receiver import Receiver

TOKENS = {"alice": "tok-alice-0123456789", "bob": "tok-bob-0123456789",
          "ops": "tok-ops-0123456789"}
SECRET = "whsec_" + "YSBrZXkgb2YgdGhpcnR5LXR3byBieXRlcywgcmVhbGx5"


class Spending(Agent):
    """Reports ``forwardedProps.calls`` (AG-UI ``TokenUsage`` dicts), one per model
    call, with a message after each."""

    capabilities = Capabilities(description="Spends tokens.")

    async def run(self, ctx: RunContext) -> Any:
        props = ctx.forwarded_props if isinstance(ctx.forwarded_props, dict) else {}
        for usage in props.get("calls", []):
            ctx.record_usage(usage)
            mid = ctx.new_id("msg")
            await ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": mid,
                            "role": "assistant"})
            await ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": "ok"})
            await ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": mid})


def principals() -> Principals:
    from outlast.http.auth import _hash

    return Principals({_hash(token): name for name, token in TOKENS.items()})


def auth(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[who]}"}


def body(thread: str, run: str, *calls: dict[str, Any]) -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "protocolVersion": "1.0",
            "messages": [{"id": f"u-{run}", "role": "user", "content": "go"}],
            "state": {}, "tools": [], "context": [], "forwardedProps": {"calls": list(calls)}}


A = {"provider": "p", "model": "a", "inputTokens": 10, "outputTokens": 2}
B = {"provider": "p", "model": "b", "inputTokens": 5, "outputTokens": 5,
     "reasoningTokens": 3, "cachedInputTokens": 4}


async def spend(c: InProcess, who: str, thread: str, *calls: dict[str, Any]) -> str:
    run = uid("r")
    resp, _ = await collect(c.client, "POST", "/agents/spend", json=body(thread, run, *calls),
                            headers=auth(who))
    assert resp.status_code == 200, resp.text  # read to its end: the run is final
    return run


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str | None:
    return None if request.param == "sqlite" else request.getfixturevalue("pg_url")


async def test_a_run_shows_its_tokens_everywhere(tmp_path: Path, store_url: str | None
                                                 ) -> None:
    receiver = Receiver().start()
    try:
        async with in_process_server(
                tmp_path, store_url=store_url, agents={"spend": Spending()},
                principals=principals(), webhooks=[receiver.url()],
                webhook_secret=SECRET) as c:
            run = await spend(c, "alice", uid("t"), A, B, A)
            c.client.headers.update(auth("alice"))
            record = await wait_final(c.client, run)
            expected = [
                {"provider": "p", "model": "a", "inputTokens": 20, "outputTokens": 4,
                 "totalTokens": 24, "reasoningTokens": 0, "cachedInputTokens": 0,
                 "calls": 2},
                {"provider": "p", "model": "b", "inputTokens": 5, "outputTokens": 5,
                 "totalTokens": 10, "reasoningTokens": 3, "cachedInputTokens": 4,
                 "calls": 1}]
            assert record["usage"] == expected
            final = (await stored_log(c.client, run))[-1].event
            assert final["type"] == "RUN_FINISHED"
            wire = {u["model"]: u for u in final["usage"]}
            assert (wire["a"]["inputTokens"], wire["b"]["reasoningTokens"]) == (20, 3)

            async def delivered() -> Any:
                return receiver.requests or None

            [request] = await wait_for(delivered)
            event = Webhook(SECRET).verify(request.body, request.headers)
            assert event["data"]["runId"] == run
            assert {u["model"]: u["inputTokens"] for u in event["data"]["usage"]} == \
                {"a": 20, "b": 5}
            metrics = (await c.client.get("/metrics")).text
            for line in ('outlast_tokens_total{agent="spend",kind="input"} 25.0',
                         'outlast_tokens_total{agent="spend",kind="output"} 9.0',
                         'outlast_tokens_total{agent="spend",kind="reasoning"} 3.0',
                         'outlast_tokens_total{agent="spend",kind="cached_input"} 4.0'):
                assert line in metrics, line
    finally:
        receiver.stop()


async def test_usage_is_summed_per_principal_model_and_thread(
        tmp_path: Path, store_url: str | None) -> None:
    async with in_process_server(tmp_path, store_url=store_url, agents={"spend": Spending()},
                                 principals=principals(), admins=["ops"]) as c:
        start = time.time()
        t1, t2 = uid("t1"), uid("t2")
        await spend(c, "alice", t1, A)
        await spend(c, "alice", t1, B)
        await spend(c, "alice", t2, A, A)
        await spend(c, "bob", uid("tb"), B)
        mine = (await c.client.get("/usage", headers=auth("alice"))).json()
        assert mine["principal"] == "alice"
        assert mine["total"] == {"inputTokens": 35, "outputTokens": 11, "totalTokens": 46,
                                 "reasoningTokens": 3, "cachedInputTokens": 4, "calls": 4}
        assert [(m["model"], m["totalTokens"]) for m in mine["models"]] == [("a", 36),
                                                                            ("b", 10)]
        assert [(t["threadId"], t["totalTokens"]) for t in mine["threads"]] == [(t2, 24),
                                                                               (t1, 22)]
        assert mine["since"] <= start <= mine["until"]
        one = (await c.client.get("/usage", params={"threads": 1},
                                  headers=auth("alice"))).json()
        assert [t["threadId"] for t in one["threads"]] == [t2]
        later = (await c.client.get("/usage", params={"since": time.time() + 60,
                                                      "until": time.time() + 120},
                                    headers=auth("alice"))).json()
        assert later["total"]["totalTokens"] == 0 and later["models"] == []
        # Another principal's usage: for --admin only.
        r = await c.client.get("/usage", params={"principal": "bob"}, headers=auth("alice"))
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
        bobs = (await c.client.get("/usage", params={"principal": "bob"},
                                   headers=auth("ops"))).json()
        assert bobs["total"]["totalTokens"] == 10 and bobs["principal"] == "bob"
        assert (await c.client.get("/usage")).status_code == 401
        # Bad queries: 422, typed.
        for params in ({"since": "yesterday"}, {"since": -1}, {"until": "nan"},
                       {"since": 10, "until": 5}, {"threads": 0}, {"threads": 10_000},
                       {"principal": "has space"}, {"principal": "x" * 300}):
            r = await c.client.get("/usage", params=params, headers=auth("ops"))
            assert r.status_code == 422, (params, r.text)
            assert r.json()["error"]["code"] == "invalid_request", (params, r.text)
        again = (await c.client.get("/usage", headers=auth("alice"))).json()
        assert again["total"] == mine["total"]
