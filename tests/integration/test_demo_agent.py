"""The demo agent as a newcomer meets it: its messages read as whole sentences, and a
knob it cannot use is refused by name before anything is stored."""

from __future__ import annotations

import re

import httpx

from outlast.agents.demo import FILLER
from tests.support.runs import row_counts
from tests.support.server import ServerProcess, collect, demo_input

SENTENCE = re.compile(r"[^.?!]+[.?!]")


async def test_every_message_is_whole_sentences(
        server: ServerProcess, client: httpx.AsyncClient) -> None:
    texts: dict[str, str] = {}
    for per_message in (5, 9, 13, 24, 40):
        run = f"words-{per_message}"
        resp, frames = await collect(client, "POST", "/agents/demo", json=demo_input(
            run, run, steps=2, step_delay_ms=0, token_delay_ms=0,
            tokens_per_message=per_message, think=True, delegate=True))
        assert resp.status_code == 200 and frames[-1].event["type"] == "RUN_FINISHED"
        for f in frames:
            if f.event["type"] in ("TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"):
                key = f"{run}/{f.event['messageId']}"
                texts[key] = texts.get(key, "") + f.event["delta"]
    assert len(texts) > 20
    padded = 0
    for key, text in texts.items():
        sentences = [s.strip() for s in SENTENCE.findall(text)]
        assert " ".join(sentences) == text, (key, text)  # nothing after the last stop
        # After its lead (the message's own first sentence or two), only whole filler
        # sentences: never a cut one.
        extra = [s for s in sentences if s in FILLER]
        lead = [s for s in sentences if s not in FILLER]
        assert sentences == lead + extra, (key, text)
        padded += bool(extra)
        words = int(key.split("/")[0].rsplit("-", 1)[1])
        assert not extra or len(text.split()) <= words, (key, text)
    assert padded > 10


async def test_a_knob_the_demo_cannot_use_is_refused_and_nothing_is_stored(
        server: ServerProcess, client: httpx.AsyncClient) -> None:
    before = row_counts(server)
    for knobs, field in (({"steps": "lots"}, "forwardedProps.demo.steps"),
                         ({"token_delay_ms": -1}, "forwardedProps.demo.token_delay_ms"),
                         ({"think": "yes"}, "forwardedProps.demo.think"),
                         ({"approve_at": [1, "2"]}, "forwardedProps.demo.approve_at"),
                         ({"step": 3}, "forwardedProps.demo.step")):
        body = demo_input("knobs-t", "knobs-r")
        body["forwardedProps"] = {"demo": knobs}
        resp = await client.post("/agents/demo", json=body)
        assert resp.status_code == 422, resp.text
        error = resp.json()["error"]
        assert error["code"] == "invalid_request" and error["field"] == field
        assert error["message"].startswith(field)
    assert row_counts(server) == before
    assert (await client.get("/threads/knobs-t")).status_code == 404
    # The same request with knobs it can use is admitted.
    resp, frames = await collect(client, "POST", "/agents/demo",
                                 json=demo_input("knobs-t", "knobs-r", steps=1))
    assert resp.status_code == 200 and frames[-1].event["type"] == "RUN_FINISHED"
