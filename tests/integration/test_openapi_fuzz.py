"""Schemathesis against the service's own OpenAPI document, on a real ``outlast serve``
with tokens: the document must say what the server enforces, and every check finds
nothing.

The examples, coverage and fuzzing phases run through schemathesis's command line with
every check (``positive_data_acceptance`` as ``tests.support.fuzz_checks`` refines it:
refusals that depend on stored state are not refusals of a request's shape). The
stateful phase follows the document's links from a real run in every scenario
(``tests.support.fuzz_stateful``): runs are created, answered, cancelled and forked
through the links, with every check on every response.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig

from tests.support.agents import AGENT_ENV, REPO_ROOT
from tests.support.fuzz_agents import FUZZ_AGENT
from tests.support.fuzz_stateful import Coverage, run_stateful
from tests.support.server import ServerProcess

SEED = 20240611
TOKEN = "tok-fuzz"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# Stateful: rounds of 40 scenarios until a run was created, answered, cancelled and
# forked through the links (about 10 s on 2 cores), 400 at most.
SCENARIOS, STEPS, MOST_SCENARIOS = 40, 8, 400
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
# The command line's phases. Requests go to the quick "fuzz" agent (the demo's runs
# take seconds each); 10 generated requests per operation and mode.
CONFIG = """
[parameters]
"path.agent" = "fuzz"

[generation]
unique-inputs = true

[phases.fuzzing.generation]
max-examples = 10
"""
STATEFUL_CONFIG = """
[checks]
positive_data_acceptance.enabled = false

[phases.stateful.generation]
mode = "positive"
"""


@dataclass
class Target:
    """The running server and its OpenAPI document."""

    server: ServerProcess
    doc: dict[str, Any]
    root: Path


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    root = tmp_path_factory.mktemp("fuzz")
    tokens = root / "tokens"
    tokens.write_text(f"fuzzer:{TOKEN}\n")
    server = ServerProcess(root / "data", ["--tokens-file", str(tokens), "--keepalive", "2",
                                           "--body-timeout", "5", "--max-id-length", "120",
                                           "--agent", FUZZ_AGENT], dict(AGENT_ENV))
    server.start()
    try:
        with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as c:
            doc = c.get("/openapi.json").json()
        yield Target(server, doc, root)
    finally:
        server.stop()


def test_every_operation_in_the_document_is_fuzzed(target: Target) -> None:
    documented = {(method.upper(), path) for path, item in target.doc["paths"].items()
                  for method in item}
    assert documented == set(OPERATIONS)


def test_the_document_says_what_the_server_enforces(target: Target) -> None:
    doc = target.doc
    schemas = doc["components"]["schemas"]
    # Bearer tokens, on every operation but probes and the web client.
    assert doc["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": "A token of the server's "
        "--tokens-file"}
    assert doc["security"] == [{"bearer": []}]
    assert doc["paths"]["/healthz"]["get"]["security"] == []
    assert "security" not in doc["paths"]["/threads"]["get"]
    # A message names its role; a content part its type.
    for name in ("UserMessage", "AssistantMessage", "ToolMessage", "SystemMessage"):
        assert {"role", "id"} <= set(schemas[name]["required"]), name
        assert schemas[name]["properties"]["id"]["maxLength"] == 120
    assert "type" in schemas["TextPart"]["required"]
    # A fork's boundary: asOf or beforeMessageId, not both.
    assert schemas["ForkBody"]["not"]["required"] == ["asOf", "beforeMessageId"]
    # Ids and seqs with the server's own rules; headers are strings, never null.
    parameters = {(p["in"], p["name"]): p["schema"]
                  for item in doc["paths"].values() for op in item.values()
                  for p in op.get("parameters", [])}
    for where in (("path", "thread_id"), ("path", "run_id"), ("header", "Idempotency-Key")):
        assert parameters[where]["pattern"] == "^[A-Za-z0-9][A-Za-z0-9._:@-]*$", where
        assert parameters[where]["maxLength"] == 120, where
    for where in (("header", "Last-Event-ID"), ("query", "after")):
        assert parameters[where]["type"] == "string", where
        assert parameters[where]["pattern"] == "^[0-9]{0,15}$", where
    for (place, name), schema in parameters.items():
        if place in ("header", "query"):
            assert "anyOf" not in schema and schema.get("type") != "null", name
    assert ("header", "Outlast-Webhook") not in parameters  # no --webhook-allow: refused
    assert parameters[("path", "agent")]["enum"] == ["demo", "fuzz"]
    # A run's response leads to its record, its thread, and an answer.
    links = doc["paths"]["/agents/{agent}"]["post"]["responses"]["200"]["links"]
    assert links["GetRun"]["parameters"] == {"run_id": "$response.header.Outlast-Run-Id"}
    resume = doc["paths"]["/threads/{thread_id}"]["get"]["responses"]["200"]["links"]["Resume"]
    assert resume["requestBody"]["resume"][0]["interruptId"] == \
        "$response.body#/interrupts/0/id"


def test_schemathesis_runs_every_check_and_finds_nothing(target: Target) -> None:
    url = target.server.url
    config = target.root / "schemathesis.toml"
    config.write_text(CONFIG)
    report = target.root / "report"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT),
           "SCHEMATHESIS_HOOKS": "tests.support.fuzz_checks"}
    done = subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run",
         f"{url}/openapi.json", "--phases", "examples,coverage,fuzzing",
         "--checks", "all", "--exclude-checks", "positive_data_acceptance",
         "-H", f"Authorization: Bearer {TOKEN}", "--seed", str(SEED), "--workers", "2",
         "--request-timeout", "30", "--no-color", "--report-dir", str(report)],
        cwd=target.root, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    tested = re.search(r"Tested: (\d+)", out)
    assert tested is not None and int(tested.group(1)) == len(OPERATIONS), out[-3000:]

    schema = schemathesis.openapi.from_url(
        f"{url}/openapi.json", config=SchemathesisConfig.from_str(STATEFUL_CONFIG),
        headers=AUTH)
    def reached(c: Coverage) -> bool:
        """A run created, an answer given, a working run cancelled, a thread forked."""
        return bool(c.cancelled and c.steps.get(("POST /agents/{agent}", 200))
                    and c.steps.get(("POST /threads/{thread_id}/resume", 200))
                    and c.steps.get(("POST /threads/{thread_id}/fork", 201)))

    coverage = run_stateful(schema, url, AUTH, "fuzz", scenarios=SCENARIOS, steps=STEPS,
                            until=reached, most=MOST_SCENARIOS)
    assert not coverage.failures, "\n\n".join(coverage.failures[:5])
    assert reached(coverage), (coverage.scenarios, coverage.cancelled, coverage.steps)
    assert len(coverage.links) > 5, coverage.links
    # What the store holds after: the same, seen from the inside (a cancel answered 202
    # ends its run a moment later).
    deadline = time.monotonic() + 30
    while True:
        db = sqlite3.connect(f"file:{target.server.data_dir / 'outlast.db'}?mode=ro",
                             uri=True)
        try:
            statuses = dict(db.execute("SELECT status, COUNT(*) FROM runs GROUP BY status"))
            answered = db.execute(
                "SELECT COUNT(*) FROM interrupts WHERE status != 'pending'").fetchone()[0]
            forks = db.execute(
                "SELECT COUNT(*) FROM threads WHERE forked_from IS NOT NULL").fetchone()[0]
        finally:
            db.close()
        if statuses.get("cancelled") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert statuses.get("cancelled", 0) > 0, statuses
    assert sum(statuses.values()) > coverage.scenarios  # runs beyond each scenario's seed
    assert answered > 0 and forks > 0
