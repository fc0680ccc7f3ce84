"""Limits per principal: runs at once, runs per minute and tokens per day, from the
server's defaults and ``--limits-file``. A create over a limit gets 429
``limit_exceeded`` with ``Retry-After`` and stores nothing; a retry of an admitted
request still attaches; a run that spends past the day's budget stops after that model
call with ``RUN_ERROR`` ``budget_exceeded``, what it did kept. On PostgreSQL the limits
hold across processes, even for creates that race each other. A limits file or flag
that is wrong stops the server with one line."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from outlast.agent import Agent, Capabilities, RunContext
from outlast.agents.demo import DemoAgent
from outlast.http.auth import Principals, _hash
from tests.support.agui_validator import assert_valid
from tests.support.inprocess import InProcess, in_process_server
from tests.support.runs import stored_log, uid, wait_final
from tests.support.server import ServerProcess, collect, demo_input

TOKENS = {"alice": "tok-alice-0123456789", "bob": "tok-bob-0123456789",
          "carol": "tok-carol-0123456789"}
LIMITS = {"alice": {"activeRuns": 1, "runsPerMinute": 3},
          "bob": {"activeRuns": 0},
          "carol": {"tokensPerDay": 20}}
SLOW = {"steps": 3, "step_delay_ms": 5000}


class Spending(Agent):
    """A model call per ``forwardedProps.calls`` entry (its tokens), each taking a moment,
    with a message after each."""

    capabilities = Capabilities(description="Spends tokens.")

    async def run(self, ctx: RunContext) -> None:
        for n, total in enumerate(ctx.forwarded_props.get("calls", []), 1):
            await asyncio.sleep(0.2)  # the model call
            ctx.record_usage({"model": "m", "inputTokens": total, "outputTokens": 0,
                              "totalTokens": total})
            mid = ctx.new_id("msg")
            await ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": mid,
                            "role": "assistant"})
            await ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid,
                            "delta": f"call {n}"})
            await ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": mid})


def auth(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[who]}"}


async def create(c: InProcess, who: str, body: dict[str, Any], agent: str = "demo"
                 ) -> httpx.Response:
    resp, _ = await collect(c.client, "POST", f"/agents/{agent}", json=body, headers=auth(who),
                            limit=1)
    return resp


def refused(resp: httpx.Response, limit: str) -> int:
    assert resp.status_code == 429, resp.text
    error = resp.json()["error"]
    assert (error["code"], error["limit"]) == ("limit_exceeded", limit), error
    wait = int(resp.headers["Retry-After"])
    assert wait >= 1 and error["retryAfter"] == wait
    return wait


@pytest.fixture
async def served(tmp_path: Path) -> Any:
    limits = tmp_path / "limits.json"
    limits.write_text(json.dumps(LIMITS))
    principals = Principals({_hash(t): who for who, t in TOKENS.items()})
    async with in_process_server(
            tmp_path, agents={"demo": DemoAgent(tmp_path / "ws"), "spend": Spending()},
            principals=principals, limit_active_runs=2, limits_file=limits) as c:
        yield c


async def test_runs_at_once_and_per_minute(served: InProcess) -> None:
    c = served
    slow = demo_input(uid("t"), uid("r"), **SLOW)
    assert (await create(c, "alice", slow)).status_code == 200
    over = demo_input(uid("t"), uid("r"), steps=1)
    refused(await create(c, "alice", over), "activeRuns")
    # Nothing of it was stored.
    for path in (f"/threads/{over['threadId']}", f"/runs/{over['runId']}"):
        assert (await c.client.get(path, headers=auth("alice"))).status_code == 404
    # A retry of the admitted request attaches, limit or not (G3).
    again = await create(c, "alice", slow)
    assert again.status_code == 200 and again.headers["Outlast-Replayed"] == "true"
    # bob has no limit on runs at once (0 overrides the server's 2).
    for _ in range(3):
        assert (await create(c, "bob", demo_input(uid("t"), uid("r"), **SLOW))
                ).status_code == 200
    # alice's third and fourth runs in a minute (her slow one was the first).
    cancel = await c.client.post(f"/runs/{slow['runId']}/cancel?wait=true",
                                 headers=auth("alice"))
    assert cancel.status_code == 200
    for _ in range(2):
        quick = demo_input(uid("t"), uid("r"), steps=0)
        assert (await create(c, "alice", quick)).status_code == 200
        c.client.headers.update(auth("alice"))
        await wait_final(c.client, quick["runId"])
    wait = refused(await create(c, "alice", demo_input(uid("t"), uid("r"), steps=0)),
                   "runsPerMinute")
    assert wait <= 60


async def test_a_run_past_the_days_budget_stops_and_no_more_start(served: InProcess) -> None:
    c = served
    c.client.headers.update(auth("carol"))
    body = {**demo_input(uid("t"), uid("r")), "forwardedProps": {"calls": [15, 10, 10, 10]}}
    assert (await create(c, "carol", body, agent="spend")).status_code == 200
    record = await wait_final(c.client, body["runId"])
    assert record["status"] == "failed", record
    assert record["error"]["code"] == "budget_exceeded"
    # Stopped after the call that passed the budget: its two calls kept, no third.
    [usage] = record["usage"]
    assert (usage["calls"], usage["totalTokens"]) == (2, 25)
    log = [f.event for f in await stored_log(c.client, body["runId"])]
    assert log[-1]["type"] == "RUN_ERROR" and log[-1]["code"] == "budget_exceeded"
    said = [e["delta"] for e in log if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert said[:2] == ["call 1", "call 2"] and "call 3" not in said
    assert_valid(log)
    refused(await create(c, "carol", demo_input(uid("t"), uid("r"), steps=0)),
            "tokensPerDay")
    # Others' budgets are their own.
    assert (await create(c, "bob", demo_input(uid("t"), uid("r"), steps=0))).status_code == 200


@pytest.mark.postgres
async def test_limits_hold_across_processes(server_factory: Any, pg_url: str) -> None:
    args = ("--store", pg_url, "--limit-active-runs", "2")
    a: ServerProcess = server_factory(*args)
    b: ServerProcess = server_factory(*args)
    # Creates racing on both processes: exactly the limit get through.
    async with a.client() as ca, b.client() as cb:
        async def one(c: httpx.AsyncClient) -> int:
            resp, _ = await collect(c, "POST", "/agents/demo", limit=1,
                                    json=demo_input(uid("t"), uid("r"), **SLOW))
            return resp.status_code

        codes = await asyncio.gather(*(one(c) for c in [ca, cb] * 4))
        assert sorted(codes) == [200, 200] + [429] * 6, codes
        listed = (await ca.get("/threads")).json()["threads"]
        assert len(listed) == 2  # the refused stored nothing


@pytest.mark.parametrize("content, why", [
    ("{not json", "not JSON"), ("[1]", "expected an object"),
    ('{"alice": {"activeRuns": -1}}', "alice.activeRuns"),
    ('{"alice": {"seats": 3}}', "alice.seats"), ('{"alice": 3}', "alice")])
def test_a_wrong_limits_file_stops_the_server_with_one_line(tmp_path: Path, content: str,
                                                           why: str) -> None:
    path = tmp_path / "limits.json"
    path.write_text(content)
    out = subprocess.run([sys.executable, "-m", "outlast.cli.main", "serve", "--limits-file",
                          str(path), "--data-dir", str(tmp_path / "d")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "--limits-file" in out.stderr and why in out.stderr and "Traceback" not in out.stderr


def test_a_negative_limit_stops_the_server_with_one_line(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "outlast.cli.main", "serve",
                          "--limit-tokens-per-day", "-5", "--data-dir", str(tmp_path / "d")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--limit-tokens-per-day" in out.stderr
