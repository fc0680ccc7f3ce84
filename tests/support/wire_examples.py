"""The wire examples of docs/resumable-ag-ui.md, made by a real ``outlast serve``.

Each example is a fenced block after a ``<!-- wire:NAME -->`` marker; ``examples``
makes them all again (ids and timestamps normalised), so a test can compare the
document with what outlast actually sends, and
``python -m tests.support.wire_examples`` rewrites the blocks after a deliberate change.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

DOC = Path(__file__).resolve().parents[2] / "docs" / "resumable-ag-ui.md"
BLOCK = re.compile(r"(<!-- wire:(?P<name>[a-z-]+) -->\n```(?P<lang>[a-z]*)\n)(?P<body>.*?)(\n```)",
                   re.S)
SHOWN_HEADERS = ("content-type", "outlast-run-id", "outlast-thread-id", "outlast-replayed")
FAST = {"step_delay_ms": 0, "token_delay_ms": 0, "tokens_per_message": 2}


def normalise(text: str) -> str:
    """Generated ids become ``msg_1``, ``result_1``...; timestamps become 0."""
    text = re.sub(r'"timestamp":\s*[0-9.]+', '"timestamp":0', text)
    seen: dict[str, str] = {}

    def name(m: re.Match[str]) -> str:
        prefix = m.group(1)
        if m.group(0) not in seen:
            seen[m.group(0)] = f"{prefix}_{sum(k.startswith(prefix) for k in seen) + 1}"
        return seen[m.group(0)]

    return re.sub(r"\b(msg|result|reasoning|id)_[0-9a-f]{16}\b", name, text)


def request_text(method: str, path: str, body: Any = None,
                 headers: dict[str, str] | None = None) -> str:
    lines = [f"{method} {path} HTTP/1.1"]
    if body is not None:
        lines.append("Content-Type: application/json")
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body is not None:
        lines += ["", json.dumps(body)]
    return "\n".join(lines)


def response_text(resp: httpx.Response, body: str) -> str:
    lines = [f"HTTP/1.1 {resp.status_code} {resp.reason_phrase}"]
    lines += [f"{k}: {resp.headers[k]}" for k in SHOWN_HEADERS if k in resp.headers]
    return "\n".join(lines) + "\n\n" + body.rstrip("\n")


def demo(thread: str, run: str, text: str, **knobs: Any) -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "protocolVersion": "1.0",
            "messages": [{"id": f"m-{run}", "role": "user", "content": text}],
            "forwardedProps": {"demo": {**FAST, **knobs}}}


async def exchange(c: httpx.AsyncClient, method: str, path: str, body: Any = None,
                   headers: dict[str, str] | None = None) -> tuple[httpx.Response, str]:
    resp = await c.request(method, path, json=body, headers=headers)
    return resp, resp.text


def frames_of(text: str) -> list[str]:
    return [b for b in text.split("\n\n") if b.strip()]


async def examples(c: httpx.AsyncClient) -> dict[str, str]:
    """Every example, keyed by its marker's name."""
    out: dict[str, str] = {}
    hdr = {"Accept": "text/event-stream"}

    # A run, created by the client's runId (§2, §3).
    body = demo("t1", "r1", "Say hello.", steps=0)
    resp, text = await exchange(c, "POST", "/agents/demo", body, {**hdr, "Idempotency-Key": "r1"})
    out["create"] = request_text("POST", "/agents/demo", body,
                                 {**hdr, "Idempotency-Key": "r1"}) + "\n\n" + \
        response_text(resp, text)

    # The same request again, after the end: it attaches (§2).
    resp, text = await exchange(c, "POST", "/agents/demo", body, {**hdr, "Idempotency-Key": "r1"})
    out["retry"] = response_text(resp, "\n\n".join(frames_of(text)[:3]) + "\n\n...")

    # A reattach in the middle of a message and a tool call's run (§4).
    body = demo("t2", "r2", "Do one step.", steps=1)
    _, text = await exchange(c, "POST", "/agents/demo", body, hdr)
    blocks = frames_of(text)
    # The cursor: the second word of the step's message (a message is open there).
    starts = [i for i, b in enumerate(blocks) if '"TEXT_MESSAGE_START"' in b]
    cursor_block = blocks[starts[1] + 2]
    cursor = int(cursor_block.split("\n")[0].removeprefix("id: "))
    h = {**hdr, "Idempotency-Key": "r2", "Last-Event-ID": str(cursor)}
    resp, text = await exchange(c, "POST", "/agents/demo", body, h)
    out["reattach"] = request_text("POST", "/agents/demo", None, h) + \
        "\n(the same body as the first request)\n\n" + response_text(resp, text)
    resp, text = await exchange(c, "GET", f"/runs/r2/events?after={cursor + 8}", None, hdr)
    out["events"] = request_text("GET", f"/runs/r2/events?after={cursor + 8}", None, hdr) + \
        "\n\n" + response_text(resp, text)

    # An approval: the run ends with it (§9); a new client hydrates the thread (§6).
    body = demo("t3", "r3", "Do one risky step.", steps=1, approve_at=[1])
    _, text = await exchange(c, "POST", "/agents/demo", body, hdr)
    out["interrupt"] = "...\n\n" + frames_of(text)[-1]
    hyd = {"threadId": "t3", "runId": "h1", "protocolVersion": "1.0", "messages": []}
    resp, text = await exchange(c, "POST", "/agents/demo", hyd, hdr)
    out["hydrate"] = request_text("POST", "/agents/demo", hyd, hdr) + "\n\n" + \
        response_text(resp, text)
    [interrupt] = json.loads(frames_of(text)[-1].split("data: ", 1)[1])["outcome"]["interrupts"]
    answer = {"threadId": "t3", "runId": "r4", "protocolVersion": "1.0", "messages": [],
              "resume": [{"interruptId": interrupt["id"], "status": "resolved",
                          "payload": {"approved": True}}]}
    resp, text = await exchange(c, "POST", "/agents/demo", answer, hdr)
    out["answer"] = request_text("POST", "/agents/demo", answer, hdr) + "\n\n" + \
        response_text(resp, "\n\n".join(frames_of(text)[:4]) + "\n\n...\n\n" +
                      frames_of(text)[-1])

    # A busy thread (§7), then cancel by run id (§8).
    slow = demo("t5", "r5", "Take your time.", steps=5, step_delay_ms=5000)
    async with c.stream("POST", "/agents/demo", json=slow, headers=hdr) as live:
        lines = live.aiter_lines()
        async for line in lines:
            if line.startswith("id: 2"):
                break
        other = demo("t5", "r6", "Something else.", steps=0)
        resp, text = await exchange(c, "POST", "/agents/demo", other, hdr)
        out["busy"] = request_text("POST", "/agents/demo", other, hdr) + "\n\n" + \
            response_text(resp, json.dumps(resp.json(), indent=2))
        resp, _ = await exchange(c, "POST", "/runs/r5/cancel")
        tail = [line async for line in lines]
    final = [b for b in "\n".join(tail).split("\n\n") if '"RUN_FINISHED"' in b]
    out["cancel"] = request_text("POST", "/runs/r5/cancel") + \
        f"\n\nHTTP/1.1 {resp.status_code} {resp.reason_phrase}\n...\n\n" + \
        "(on the run's stream)\n...\n\n" + final[-1].strip()

    # What a server advertises (§11).
    agents = (await c.get("/agents")).json()["agents"]
    caps = next(a for a in agents if a["name"] == "demo")["capabilities"]
    out["capabilities"] = request_text("GET", "/agents") + "\n\n" + \
        "HTTP/1.1 200 OK\n\n" + json.dumps(
            {"agents": [{"name": "demo", "...": "...", "capabilities": caps}]}, indent=2)
    return {k: normalise(v) for k, v in out.items()}


def blocks(doc: str) -> dict[str, str]:
    """The document's wire examples, keyed by marker name."""
    return {m.group("name"): m.group("body") for m in BLOCK.finditer(doc)}


def rewrite(doc: str, made: dict[str, str]) -> str:
    return BLOCK.sub(lambda m: m.group(1) + made.get(m.group("name"), m.group("body"))
                     + m.group(5), doc)


async def _main() -> None:
    from tests.support.server import ServerProcess

    with tempfile.TemporaryDirectory() as d:
        srv = ServerProcess(Path(d)).start()
        try:
            async with srv.client() as c:
                made = await examples(c)
        finally:
            srv.stop()
    DOC.write_text(rewrite(DOC.read_text(), made))
    print(f"rewrote {len(blocks(DOC.read_text()))} wire examples in {DOC}", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(_main())
