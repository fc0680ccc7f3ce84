"""Inspect and control a running service: threads, runs, tail, cancel, answer."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import httpx


def add_commands(sub: Any) -> None:
    def common(p: Any) -> None:
        p.add_argument("--url", default=os.environ.get("OUTLAST_URL", "http://127.0.0.1:8765"))
        p.add_argument("--token", default=os.environ.get("OUTLAST_TOKEN"))

    p = sub.add_parser("threads", help="list threads")
    common(p)
    p.add_argument("--status", choices=["idle", "busy", "interrupted", "error"])
    p = sub.add_parser("thread", help="show a thread's snapshot")
    common(p)
    p.add_argument("thread_id")
    p = sub.add_parser("runs", help="list a thread's runs")
    common(p)
    p.add_argument("thread_id")
    p = sub.add_parser("run", help="show a run")
    common(p)
    p.add_argument("run_id")
    p = sub.add_parser("tail", help="follow a run's events, resuming across disconnects")
    common(p)
    p.add_argument("run_id")
    p.add_argument("--after", type=int, default=0)
    p = sub.add_parser("cancel", help="stop a run")
    common(p)
    p.add_argument("run_id")
    p.add_argument("--wait", action="store_true")
    p = sub.add_parser("answer", help="answer a thread's pending interrupts")
    common(p)
    p.add_argument("thread_id")
    verdict = p.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--approve", action="store_true")
    verdict.add_argument("--deny", action="store_true")
    p.add_argument("--args", help="edited tool arguments, as a JSON object")


class CliError(Exception):
    pass


def _client(ns: Any) -> httpx.Client:
    headers = {"Authorization": f"Bearer {ns.token}"} if ns.token else {}
    return httpx.Client(base_url=ns.url, headers=headers, timeout=httpx.Timeout(30, read=None))


def _check(resp: httpx.Response) -> Any:
    if resp.status_code >= 400:
        try:
            err = resp.json()["error"]
            raise CliError(f"{resp.status_code} {err['code']}: {err['message']}")
        except (ValueError, KeyError, TypeError):
            raise CliError(f"{resp.status_code}: {resp.text[:200]}") from None
    return resp.json()


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _tail(c: httpx.Client, run_id: str, after: int) -> None:
    backoff = 0.5
    while True:
        try:
            with c.stream("GET", f"/runs/{run_id}/events",
                          headers={"Last-Event-ID": str(after)}) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    _check(resp)
                seq = None
                for line in resp.iter_lines():
                    if line.startswith("id: "):
                        seq = int(line[4:])
                    elif line.startswith("data: "):
                        event = json.loads(line[6:])
                        print(json.dumps({"seq": seq, **event}, ensure_ascii=False), flush=True)
                        if seq is not None:
                            after = seq
                        if event.get("type") in ("RUN_FINISHED", "RUN_ERROR"):
                            return
                        seq = None
                    backoff = 0.5
            return
        except (httpx.TransportError, httpx.RemoteProtocolError) as exc:
            print(f"# connection lost ({exc.__class__.__name__}); resuming after {after}",
                  file=sys.stderr)
            time.sleep(backoff)
            backoff = min(backoff * 2, 10)


def run(ns: Any) -> int:
    try:
        with _client(ns) as c:
            if ns.command == "threads":
                params = {"status": ns.status} if ns.status else {}
                _print(_check(c.get("/threads", params=params)))
            elif ns.command == "thread":
                _print(_check(c.get(f"/threads/{ns.thread_id}")))
            elif ns.command == "runs":
                _print(_check(c.get(f"/threads/{ns.thread_id}/runs")))
            elif ns.command == "run":
                _print(_check(c.get(f"/runs/{ns.run_id}")))
            elif ns.command == "tail":
                _tail(c, ns.run_id, ns.after)
            elif ns.command == "cancel":
                _print(_check(c.post(f"/runs/{ns.run_id}/cancel",
                                     params={"wait": "true"} if ns.wait else {})))
            elif ns.command == "answer":
                thread = _check(c.get(f"/threads/{ns.thread_id}"))
                pending = thread.get("interrupts") or []
                if not pending:
                    raise CliError("the thread has no pending interrupts")
                payload: dict[str, Any] = {"approved": bool(ns.approve)}
                if ns.args:
                    try:
                        payload["editedArgs"] = json.loads(ns.args)
                    except json.JSONDecodeError as exc:
                        raise CliError(f"--args is not JSON: {exc}") from None
                    if not isinstance(payload["editedArgs"], dict):
                        raise CliError("--args must be a JSON object")
                entries = [{"interruptId": i["id"], "status": "resolved", "payload": payload}
                           for i in pending]
                _print(_check(c.post(f"/threads/{ns.thread_id}/resume",
                                     json={"resume": entries})))
    except CliError as exc:
        print(f"outlast: {exc}", file=sys.stderr)
        return 1
    except httpx.TransportError as exc:
        print(f"outlast: cannot reach {ns.url}: {exc}", file=sys.stderr)
        return 1
    return 0
