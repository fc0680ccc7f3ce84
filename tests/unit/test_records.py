"""Run records read their input only when asked, a started record keeps what was read,
and a holder that is done with the input can let it go."""

from __future__ import annotations

import json
from typing import Any

from outlast.store.records import RunRecord


def row(**over: Any) -> dict[str, Any]:
    return {"rid": 1, "principal": "o", "id": "r", "tid": 1, "thread_id": "t", "agent": "a",
            "status": "running", "idempotency_key": "k", "fingerprint": "f",
            "input": json.dumps({"messages": [{"id": "u", "role": "user", "content": "hi"}]}),
            "options": "{}", "created_at": 0.0, "started_at": 0.0, "finished_at": None,
            "attempts": 1, "last_seq": 0, "outcome": None, "error": None,
            "lease_holder": None, "lease_expires_at": None, "cancel_requested": 0, **over}


def test_the_input_is_read_on_first_use_and_once() -> None:
    run = RunRecord.from_row(row())
    assert "input" not in vars(run)
    assert run.input["messages"][0]["id"] == "u" and run.input is run.input
    assert RunRecord.from_row(row(input=None)).input == {}


def test_a_started_record_is_the_same_run_at_seq_1_with_its_input_as_read() -> None:
    run = RunRecord.from_row(row())
    parsed = run.input
    started = run.started()
    assert started == RunRecord.from_row(row(last_seq=1))
    assert started.input is parsed  # the claim read it; the execution does not again
    assert "input" not in vars(RunRecord.from_row(row()).started())


def test_a_record_without_its_input_is_the_same_run_with_an_empty_input() -> None:
    run = RunRecord.from_row(row(last_seq=5))
    assert run.input  # parsed and cached on the record
    bare = run.without_input()
    assert bare.input_json is None and "input" not in vars(bare)  # nor its parse
    assert bare.input == {}
    assert bare == RunRecord.from_row(row(last_seq=5, input=None))
    assert bare.without_input() is bare
