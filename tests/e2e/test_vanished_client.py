"""A client that vanishes without closing (a phone losing its network) is noticed
within the keepalive interval, so ``Outlast-On-Disconnect: cancel`` cancels its run.

The server and the client run in a network namespace of their own; taking its
loopback down makes the server's keepalive writes go unacknowledged, as when a
peer disappears. ``TCP_USER_TIMEOUT`` (set to the keepalive interval on the
listening socket) turns that silence into a failed write.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import ServerProcess

CLIENT = textwrap.dedent("""
    import sys, httpx
    url, run = sys.argv[1], sys.argv[2]
    body = {"threadId": "t-" + run, "runId": run, "protocolVersion": "1.0",
            "messages": [{"id": "u-" + run, "role": "user", "content": "go"}],
            "forwardedProps": {"demo": {"steps": 3, "step_delay_ms": 4000,
                                        "tokens_per_message": 2, "token_delay_ms": 5}}}
    with httpx.Client(timeout=None) as c:
        with c.stream("POST", url + "/agents/demo", json=body,
                      headers={"Outlast-On-Disconnect": "cancel"}) as resp:
            for line in resp.iter_lines():
                print(line, flush=True)
""")

STATUS = textwrap.dedent("""
    import sys, httpx
    print(httpx.get(sys.argv[1] + "/runs/" + sys.argv[2], timeout=10).json()["status"])
""")


@pytest.fixture
def netns() -> Iterator[list[str]]:
    """A fresh network namespace with its loopback up (needs root and iproute2)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2")
    name = f"outlast-t{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", name], capture_output=True).returncode != 0:
        pytest.skip("this machine does not allow network namespaces")
    run = ["ip", "netns", "exec", name]
    try:
        subprocess.run([*run, "ip", "link", "set", "lo", "up"], check=True)
        yield run
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def _status(netns: list[str], url: str, run_id: str) -> str:
    out = subprocess.run([*netns, sys.executable, "-c", STATUS, url, run_id],
                         capture_output=True, text=True, timeout=30)
    return out.stdout.strip() or out.stderr.strip()


def _vanish(netns: list[str], data_dir: Path, keepalive: str, outage: float = 3.0) -> str:
    """On a server with this keepalive, start a run with on_disconnect=cancel, cut the
    network for ``outage`` seconds while the run waits in a tool, bring it back, and
    return the run's status then."""
    server = ServerProcess(data_dir, ["--keepalive", keepalive], prefix=netns).start()
    try:
        return _cut_network(netns, server.url, f"vanish-{keepalive}", outage)
    finally:
        server.stop()


def _cut_network(netns: list[str], url: str, run_id: str, outage: float) -> str:
    client = subprocess.Popen([*netns, sys.executable, "-c", CLIENT, url, run_id],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert client.stdout is not None
        seen = 0
        for line in client.stdout:
            if line.startswith("data: ") and "TOOL_CALL_END" in line:
                seen += 1
                break
        assert seen, "the run never reached its first tool"
        subprocess.run([*netns, "ip", "link", "set", "lo", "down"], check=True)
        time.sleep(outage)
        subprocess.run([*netns, "ip", "link", "set", "lo", "up"], check=True)
        time.sleep(0.5)
        return _status(netns, url, run_id)
    finally:
        client.kill()
        client.wait(10)


def test_a_vanished_client_is_noticed_within_the_keepalive_interval(
        netns: list[str], tmp_path: Path) -> None:
    status = _vanish(netns, tmp_path / "fast", keepalive="1")
    # The keepalive writes went unacknowledged for over a second: the stream was
    # torn down and, as the request asked, its run cancelled.
    assert status == "cancelled", status


def test_a_blip_shorter_than_the_keepalive_interval_is_survived(
        netns: list[str], tmp_path: Path) -> None:
    status = _vanish(netns, tmp_path / "slow", keepalive="15")
    # Same outage, longer interval: TCP retransmits once the network is back,
    # the connection lives, the run goes on.
    assert status == "running", status
