"""Schemathesis hooks for the fuzz test (``SCHEMATHESIS_HOOKS=tests.support.fuzz_checks``).

``positive_data_acceptance`` expects a schema-valid request to succeed. Some refusals of
schema-valid requests depend on what is stored, which no schema can say: a key used
before with another body, answers to interrupts that are not the pending ones, a seq
past a run's last event, a cursor this server never gave. This check is that one with
those refusals, recognized by their error codes, let through; any other refusal of a
schema-valid request (a refusal of its shape) still fails it.
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis
from schemathesis.openapi.checks import RejectedPositiveData
from schemathesis.specs.openapi.checks import positive_data_acceptance

# Error codes that answer a well-formed request by what is stored (docs/spec.md §3).
STATE_CODES = frozenset({
    "idempotency_key_reused",  # the key was used with another body before
    "resume_incomplete",  # answers must name exactly the interrupts pending now
    "invalid_answer",  # an answer of the wrong shape for the interrupt it names
    "interrupt_expired",
    "run_compacted",  # events removed by retention
})
# invalid_request and invalid_last_event_id refusals that are about stored state: each
# message names the stored thing the request does not match.
STATE_MESSAGES = (
    "is past the run's last event",  # Last-Event-ID / ?after= beyond the run's log
    "is not one this server returned",  # a cursor of GET /threads
    "must be a runId of this thread",  # ?before= of GET /threads/{id}/runs
    "which no assistant message of this thread or input holds",  # a tool result's call
    "names no run of this thread",  # a fork's asOf.runId
    "must be a seq of run",  # a fork's asOf.seq beyond that run's log
    "is not a safe boundary",  # a fork's asOf.seq
    "names no message of this thread",  # a fork's beforeMessageId
    "since is after until",  # GET /usage: until is now by default, so a later since
)


def _state_refusal(body: Any) -> bool:
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return False
    if error.get("code") in STATE_CODES:
        return True
    message = str(error.get("message", ""))
    return error.get("code") in ("invalid_request", "invalid_last_event_id") and any(
        part in message for part in STATE_MESSAGES)


@schemathesis.check
def positive_data_acceptance_but_state(ctx: Any, response: Any, case: Any) -> bool | None:
    """``positive_data_acceptance``, save for refusals that depend on stored state."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except RejectedPositiveData:
        try:
            body = json.loads(response.content)
        except ValueError:
            raise
        if _state_refusal(body):
            return None
        raise
