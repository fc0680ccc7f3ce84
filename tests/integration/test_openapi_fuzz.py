"""Schemathesis against the service's own OpenAPI document, on a real ``outlast serve``.

Every operation gets a bounded number of generated requests, valid and invalid
ones, from a fixed seed: no response may be a 5xx, and every response must match
what the document says (status, content type, body schema; for event streams,
each event). Generation aims some requests at stored resources and at a quick
test agent, so the fuzzer reaches past "not found".
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import requests  # schemathesis calls the server through requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.generation import GenerationMode

from tests.support.hostile_agents import HOSTILE_ENV, QUICK_AGENT
from tests.support.server import ServerProcess, demo_input

SEED = 20240611
EXAMPLES = 20  # per operation and generation mode
TOKEN = "tok-fuzz"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]
OPERATIONS = [
    ("GET", "/agents"),
    ("POST", "/agents/{agent}"),
    ("GET", "/threads"),
    ("GET", "/threads/{thread_id}"),
    ("GET", "/threads/{thread_id}/runs"),
    ("POST", "/threads/{thread_id}/resume"),
    ("POST", "/threads/{thread_id}/fork"),
    ("DELETE", "/threads/{thread_id}"),
    ("GET", "/runs/{run_id}"),
    ("GET", "/runs/{run_id}/events"),
    ("POST", "/runs/{run_id}/cancel"),
    ("POST", "/admin/gc"),
    ("GET", "/usage"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/"),
]


@dataclass
class Target:
    """The running server, its OpenAPI document and the ids stored on it."""

    server: ServerProcess
    schema: Any
    threads: tuple[str, ...] = ("f-asked", "f-done")
    runs: tuple[str, ...] = ("f-asked-run", "f-done-run")


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    root = tmp_path_factory.mktemp("fuzz")
    tokens = root / "tokens"
    tokens.write_text(f"fuzzer:{TOKEN}\n")
    server = ServerProcess(root / "data", ["--tokens-file", str(tokens), "--keepalive", "2",
                                           "--body-timeout", "5", "--agent", QUICK_AGENT],
                           dict(HOSTILE_ENV))
    server.start()
    try:
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as c:
            for thread, run, knobs in (("f-asked", "f-asked-run", {"approve_at": [1]}),
                                       ("f-done", "f-done-run", {})):
                body = demo_input(thread, run, steps=1, step_delay_ms=10, **knobs)
                assert c.post("/agents/demo", json=body).status_code == 200
        schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
        yield Target(server, schema)
    finally:
        server.stop()


def test_every_operation_in_the_document_is_fuzzed(target: Target) -> None:
    documented = {(op.method.upper(), op.path)
                  for op in (result.ok() for result in target.schema.get_all_operations())}
    assert documented == set(OPERATIONS)


def _aim(case: Any, target: Target) -> None:
    """Point some generated requests at stored resources and at a registered agent."""
    params = case.path_parameters or {}
    pick = zlib.crc32(repr((case.body, case.query, params)).encode())
    if "agent" in params and pick % 4:
        params["agent"] = "quick"
    if "thread_id" in params and pick % 3:
        params["thread_id"] = target.threads[pick % len(target.threads)]
    if "run_id" in params and pick % 3:
        params["run_id"] = target.runs[pick % len(target.runs)]


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_generated_requests_get_no_5xx_and_only_documented_answers(
        target: Target, method: str, path: str) -> None:
    operation = target.schema[path][method]
    failures: list[str] = []
    statuses: dict[int, int] = {}
    modes = [GenerationMode.POSITIVE]
    if _has_inputs(operation):  # without inputs there is nothing to get wrong
        modes.append(GenerationMode.NEGATIVE)
    with requests.Session() as session:
        session.headers.update(AUTH)
        for mode in modes:
            _fuzz(target, operation, mode, session, failures, statuses)
    assert not failures, "\n\n".join(failures[:5])
    assert sum(statuses.values()) >= 1
    assert not any(status >= 500 for status in statuses), statuses


def _fuzz(target: Target, operation: Any, mode: GenerationMode, session: requests.Session,
          failures: list[str], statuses: dict[int, int]) -> None:
    """Send ``EXAMPLES`` generated requests; collect every check that fails."""

    @seed(SEED)
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def fuzz(case: Any) -> None:
        _aim(case, target)
        response = case.call(base_url=target.server.url, session=session, timeout=30)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        try:
            case.validate_response(response, checks=CHECKS, headers=AUTH)
        except Exception as exc:  # collect them all, report them together
            failures.append(f"{mode.value}: {exc}")

    fuzz()


def _has_inputs(operation: Any) -> bool:
    definition = operation.definition.raw
    return bool(definition.get("parameters") or definition.get("requestBody"))
