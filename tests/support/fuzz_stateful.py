"""Schemathesis's stateful phase over the document's links, each scenario starting from
a real run: the state machine's first responses are a ``POST /agents/{agent}`` that
admitted a run (which asks a question) and the ``GET /threads/{id}`` of its thread, so
the links from them — to the run, its thread, the answer, the continuation and its
cancel, a fork — are followed with real ids, not hoped for from random input."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import hypothesis
from hypothesis import HealthCheck, Phase
from hypothesis.errors import Flaky
from schemathesis.generation.stateful.state_machine import StepInput, StepOutput

from tests.support.fuzz_checks import positive_data_acceptance_but_state


@dataclass
class Coverage:
    """What the scenarios did: the links they followed and the steps they took."""

    links: set[str] = field(default_factory=set)
    steps: dict[tuple[str, int], int] = field(default_factory=dict)
    scenarios: int = 0
    cancelled: int = 0
    failures: list[str] = field(default_factory=list)


def run_stateful(schema: Any, base_url: str, headers: dict[str, str], agent: str, *,
                 scenarios: int, steps: int, until: Callable[[Coverage], bool],
                 most: int) -> Coverage:
    """Run rounds of ``scenarios`` scenarios of up to ``steps`` steps until ``until``
    holds or ``most`` scenarios have run. Failures are collected, not raised."""
    coverage = Coverage()
    workflow: Any = schema.as_state_machine()
    operation = schema["/agents/{agent}"]["POST"]
    thread_view = schema["/threads/{thread_id}"]["GET"]
    answer = schema["/threads/{thread_id}/resume"]["POST"]

    class FromARealRun(workflow):  # type: ignore[misc]
        def setup(self) -> None:
            coverage.scenarios += 1
            thread = f"st-{uuid.uuid4().hex[:12]}"
            case = operation.Case(
                path_parameters={"agent": agent}, media_type="application/json",
                body={"threadId": thread, "runId": f"{thread}-r1", "messages": [
                    {"id": "m1", "role": "user", "content": "go"}]})
            self._seed(case, 200)
            # And the thread as a client reads it next, with the run's question.
            view = self._seed(thread_view.Case(path_parameters={"thread_id": thread}), 200)
            if coverage.scenarios % 2 == 0:
                # Every other scenario starts from the question answered: its links lead
                # to a continuation that is working (to cancel, fork, read).
                [question] = view.json()["interrupts"]
                self._seed(answer.Case(
                    path_parameters={"thread_id": thread}, media_type="application/json",
                    body={"resume": [{"interruptId": question["id"], "status": "resolved",
                                      "payload": {"approved": True}}]}), 200)

        def _seed(self, case: Any, status: int) -> Any:
            response = case.call(base_url=base_url, headers=headers, timeout=30)
            assert response.status_code == status, response.text
            self.recorder.record_case(case=case)
            self.recorder.record_response(case_id=case.id, response=response)
            self._add_results_to_targets(("catch_all",), [StepOutput(response, case)])
            return response

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": base_url, "headers": headers, "timeout": 60}

        def step(self, input: StepInput) -> StepOutput:
            output: StepOutput = super().step(input)
            if input.transition is not None:
                coverage.links.add(input.transition.id)
            key = (output.case.operation.label, output.response.status_code)
            coverage.steps[key] = coverage.steps.get(key, 0) + 1
            if output.case.operation.label == "POST /runs/{run_id}/cancel" and (
                    output.response.status_code == 202 or _status(output) == "cancelled"):
                coverage.cancelled += 1  # a run that was working, stopped by the link
            return output

        def validate_response(self, response: Any, case: Any,
                              additional_checks: Any = None, **kwargs: Any) -> None:
            # Collected, not raised (as schemathesis's own runner does): a raise makes
            # Hypothesis replay the scenario, which a server with state cannot repeat.
            try:
                super().validate_response(
                    response, case, additional_checks=[positive_data_acceptance_but_state],
                    **kwargs)
            except Exception as exc:
                coverage.failures.append(
                    f"{case.operation.label} -> {response.status_code}: {exc}\n"
                    f"{case.as_curl_command(headers={})}\n{response.text[:500]}")

    while coverage.scenarios < most and not (coverage.failures or until(coverage)):
        try:
            FromARealRun.run(settings=hypothesis.settings(
                max_examples=scenarios, stateful_step_count=steps, deadline=None,
                database=None, phases=[Phase.generate],
                suppress_health_check=list(HealthCheck)))
        except Flaky:
            # Hypothesis replays a scenario to shrink it, and a server with state does
            # not repeat itself: that round ends there, as in schemathesis's own runner.
            pass
    return coverage


def _status(output: StepOutput) -> Any:
    try:
        return output.response.json().get("status")
    except (ValueError, AttributeError):
        return None
