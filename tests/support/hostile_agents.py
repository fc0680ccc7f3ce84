"""Agents and helpers for the access-control and hostile-input tests.

The agents are registered on a real server with ``--agent name=module:factory``
(the subprocess needs ``HOSTILE_ENV``); ``dump_store`` reads the server's SQLite
file directly, so a test can prove a refused request changed nothing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from outlast.agent import Agent, Capabilities, RunContext
from outlast.config import Settings
from tests.support.agents import AGENT_ENV, say

HOSTILE_ENV = AGENT_ENV  # these agents live beside those of agents.py
BLOAT_AGENT = "bloat=tests.support.hostile_agents:bloat"
QUICK_AGENT = "quick=tests.support.hostile_agents:quick"
PATCHY_AGENT = "patchy=tests.support.hostile_agents:patchy"


class BloatAgent(Agent):
    """Says one sentence, then opens a message and emits one delta of
    ``forwardedProps.bloat.bytes`` characters (default 64 KiB)."""

    capabilities = Capabilities(description="Emits one oversized event.")

    async def run(self, ctx: RunContext) -> None:
        await say(ctx, "about to say far too much")
        props: Any = ctx.forwarded_props
        size = 64 << 10
        if isinstance(props, dict) and isinstance(props.get("bloat"), dict):
            size = int(props["bloat"].get("bytes", size))
        message_id = ctx.new_id("msg")
        await ctx.emit({"type": "TEXT_MESSAGE_START", "messageId": message_id,
                        "role": "assistant"})
        await ctx.emit({"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id,
                        "delta": "x" * size})
        await ctx.emit({"type": "TEXT_MESSAGE_END", "messageId": message_id})


class QuickAgent(Agent):
    """Answers at once with one short message, whatever the input."""

    capabilities = Capabilities(description="Answers at once.")

    async def run(self, ctx: RunContext) -> None:
        await say(ctx, "done")


class PatchyAgent(Agent):
    """Puts the last user message into shared state, then sends state patches that
    cannot apply (a failed ``test``, a missing member): the engine logs and drops them."""

    capabilities = Capabilities(description="Sends patches that do not apply.")

    async def run(self, ctx: RunContext) -> None:
        text = next((m.get("content") for m in reversed(ctx.messages)
                     if m.get("role") == "user"), "")
        await ctx.emit({"type": "STATE_SNAPSHOT", "snapshot": {"note": text}})
        await ctx.emit({"type": "STATE_DELTA",
                        "delta": [{"op": "test", "path": "/note", "value": "other"}]})
        await ctx.emit({"type": "STATE_DELTA",
                        "delta": [{"op": "remove", "path": "/missing/member"}]})
        await say(ctx, "patched")


def bloat(settings: Settings) -> Agent:
    """``--agent bloat=tests.support.hostile_agents:bloat``."""
    return BloatAgent()


def quick(settings: Settings) -> Agent:
    """``--agent quick=tests.support.hostile_agents:quick``."""
    return QuickAgent()


Dump = dict[str, list[tuple[Any, ...]]]


def dump_store(data_dir: Path, principal: str | None = None) -> Dump:
    """Every row of every table of the server's SQLite store, in a stable order; with
    ``principal``, only the rows that belong to that principal (directly, or through one
    of its threads or runs)."""
    db = sqlite3.connect(f"file:{data_dir / 'outlast.db'}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY name")]
        who = (principal,)
        tids = {r[0] for r in db.execute("SELECT tid FROM threads WHERE principal = ?", who)}
        rids = {r[0] for r in db.execute("SELECT rid FROM runs WHERE principal = ?", who)}
        dump: Dump = {}
        for table in tables:
            columns = [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]
            order = ", ".join(f'"{c}"' for c in columns)
            rows = list(db.execute(f'SELECT * FROM "{table}" ORDER BY {order}'))
            if principal is not None:
                if "principal" in columns:
                    rows = [r for r in rows if r[columns.index("principal")] == principal]
                elif "tid" in columns:
                    rows = [r for r in rows if r[columns.index("tid")] in tids]
                elif "rid" in columns:
                    rows = [r for r in rows if r[columns.index("rid")] in rids]
            dump[table] = rows
        return dump
    finally:
        db.close()


def patchy(settings: Settings) -> Agent:
    """``--agent patchy=tests.support.hostile_agents:patchy``."""
    return PatchyAgent()


BLOCKING_AGENT = "blocking=tests.support.hostile_agents:blocking"


class BlockingAgent(Agent):
    """Blocks the event loop (``time.sleep``, as a synchronous HTTP call would) for
    ``forwardedProps.block`` seconds between two messages; each execution of the
    blocking step appends ``<run id>`` to ``$BLOCK_LOG``, so a run taken over and
    executed again shows twice."""

    capabilities = Capabilities(description="Blocks the event loop.", supports_resume=True)

    async def run(self, ctx: RunContext) -> None:
        import os
        import time

        props = ctx.forwarded_props if isinstance(ctx.forwarded_props, dict) else {}
        await say(ctx, "before")
        await ctx.boundary()
        with open(os.environ["BLOCK_LOG"], "a", encoding="utf-8") as log:
            log.write(f"{ctx.run_id} {ctx.attempt}\n")
        time.sleep(float(props.get("block", 2.0)))  # blocking on purpose
        await say(ctx, "after")


def blocking(settings: Settings) -> Agent:
    """``--agent blocking=tests.support.hostile_agents:blocking``."""
    return BlockingAgent()


FAILING_AGENT = "failing=tests.support.hostile_agents:failing"


class FailingAgent(Agent):
    """Logs through its own logger, quoting ``$FAILING_SECRET`` as a careless agent
    might, then raises a ``ValueError`` whose message quotes it again."""

    capabilities = Capabilities(description="Fails, and talks about secrets.")

    async def run(self, ctx: RunContext) -> None:
        import logging
        import os

        secret = os.environ["FAILING_SECRET"]
        logging.getLogger("failing_agent").warning("calling the model with key %s", secret)
        await say(ctx, "about to fail")
        raise ValueError(f"the model refused key {secret}")


def failing(settings: Settings) -> Agent:
    """``--agent failing=tests.support.hostile_agents:failing``."""
    return FailingAgent()
