"""What a running run keeps of the history its client resent: the agent's input shares
the thread's copy of every message it holds unchanged, and a stored request lets go of
its body (``tests/integration/test_history_held_once.py`` checks the whole process)."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from outlast.engine.history import sharing_history
from outlast.http.request_limits import release_body
from outlast.http.request_models import RunAgentInput
from outlast.protocol.fold import ThreadFold


def message(i: int, text: str) -> dict[str, Any]:
    return {"id": f"m{i}", "role": "user", "content": text}


def test_unchanged_messages_become_the_threads_own_and_the_others_stay() -> None:
    fold = ThreadFold([message(1, "one"), message(2, "two")])
    resent = [message(1, "one"), message(2, "edited"), message(3, "new"), "not a message"]
    run_input = {"threadId": "t", "messages": resent}
    out = sharing_history(fold, run_input)
    assert out == run_input and out is not run_input
    assert out["messages"][0] is fold.messages[0]  # equal: the thread's copy
    assert out["messages"][1] is resent[1]  # changed by the client: its own
    assert out["messages"][2] is resent[2] and out["messages"][3] is resent[3]
    assert run_input["messages"] is resent  # the input itself is not changed
    assert sharing_history(fold, {"threadId": "t"}) == {"threadId": "t"}


def test_a_released_body_holds_nothing_where_the_framework_keeps_it() -> None:
    body = {"threadId": "t", "runId": "r", "state": {"k": "v"}, "tools": [],
            "context": [], "forwardedProps": {"p": 1},
            "messages": [message(1, "history " * 100)]}
    request = Request({"type": "http", "method": "POST", "headers": []})
    request._body = json.dumps(body).encode()
    request._json = body
    model = RunAgentInput.model_validate(body)
    release_body(request, model)
    assert request._body == b"" and body == {}
    assert model.messages == [] and model.state == {} and model.forwarded_props == {}
    assert model.thread_id == "t" and model.run_id == "r"  # what identifies it stays
