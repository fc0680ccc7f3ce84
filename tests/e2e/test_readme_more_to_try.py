"""The README's "More to try" runs as printed: its commands, one after the other, in a
shell at the repository's root against a real server (at the test server's address,
which ``OUTLAST_URL`` gives the CLI and which replaces the printed one in the URLs)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx

from tests.support.server import ServerProcess, collect

REPO_ROOT = Path(__file__).resolve().parents[2]
PRINTED_URL = "http://127.0.0.1:8765"


def more_to_try() -> str:
    readme = (REPO_ROOT / "README.md").read_text()
    start = readme.index("More to try")
    block = re.search(r"```bash\n(.*?)```", readme[start:], re.S)
    assert block is not None, "README.md: no bash block after 'More to try'"
    return block.group(1)


def tour_first_run() -> dict[str, Any]:
    """The body of the tour's first request (run r1 on thread t1)."""
    readme = (REPO_ROOT / "README.md").read_text()
    body = re.search(r"-d '(\{.*?\})'", readme[readme.index("Five minutes"):], re.S)
    assert body is not None
    value: dict[str, Any] = json.loads(body.group(1))
    return value


async def test_more_to_try_works_as_printed(server: ServerProcess,
                                            client: httpx.AsyncClient) -> None:
    # After the tour: its run r1 on t1 (stopped early here, to save the wait).
    first = tour_first_run()
    assert (first["threadId"], first["runId"]) == ("t1", "r1")
    _, frames = await collect(client, "POST", "/agents/demo", json=first, limit=2)
    assert frames[0].event["type"] == "RUN_STARTED"
    assert (await client.post("/runs/r1/cancel?wait=true")).json()["status"] == "cancelled"

    script = more_to_try()
    assert PRINTED_URL in script and ".venv/bin/outlast" in script
    env = {**os.environ, "OUTLAST_URL": server.url, "NO_COLOR": "1"}
    env.pop("OUTLAST_TOKEN", None)
    done = subprocess.run(["bash", "-c", script.replace(PRINTED_URL, server.url)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=240)
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, (out, err)
    assert "error" not in err.lower() and "Traceback" not in err, err

    # 6: a new run stops for an approval (not 422 idempotency_key_reused).
    assert '"code":"idempotency_key_reused"' not in out
    r2 = (await client.get("/runs/r2")).json()
    assert r2["status"] == "interrupted" and r2["threadId"] == "t1"
    # 7: listed as waiting, approved, and the continuation followed to its end.
    lines = out.splitlines()
    assert any(line.startswith("t1 ") and " interrupted " in line for line in lines), out
    assert any(line.startswith("approved; continuation run ") for line in lines), out
    assert "run succeeded" in lines, out
    thread = (await client.get("/threads/t1")).json()
    assert thread["status"] == "idle" and not thread["interrupts"]
    # 8: the long run outlived its request and was stopped by id.
    assert lines[-1] == "run r3: cancelled", out
    assert (await client.get("/runs/r3")).json()["status"] == "cancelled"
