"""``outlast check URL``: measure any AG-UI HTTP endpoint against the resumable AG-UI
binding (docs/resumable-ag-ui.md) and say, check by check, what holds."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from outlast.cli.client import json_object

DESCRIPTION = """\
Check an AG-UI endpoint (the URL an HttpAgent posts to) against resumable AG-UI
(docs/resumable-ag-ui.md). Each check reports pass, fail or skip, the section of the
document it tests and its evidence. Exit status: 0 when no check failed, 1 otherwise,
2 for a usage mistake."""

EPILOG = """\
examples:
  outlast check http://127.0.0.1:8765/agents/demo
  outlast check http://127.0.0.1:8765/agents/demo --json
  outlast check http://127.0.0.1:8000/ --prompt 'What is 2+2?' --forwarded-props '{}'
  outlast check URL --restart-cmd 'systemctl restart my-agent-server'"""


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError("must be 'Name: value'")
    return name.strip(), value.strip()


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a number of seconds") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError("must be more than 0 and at most 3600")
    return value


def add_command(sub: Any) -> None:
    """Register ``check`` on ``outlast``'s subparsers."""
    from outlast.conformance import CHECKS
    from outlast.conformance.session import (
        DEFAULT_APPROVAL_PROMPT,
        DEFAULT_APPROVAL_PROPS,
        DEFAULT_PROMPT,
        DEFAULT_PROPS,
    )

    p: argparse.ArgumentParser = sub.add_parser(
        "check", help="check any AG-UI endpoint against resumable AG-UI",
        description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url", metavar="URL", help="the AG-UI endpoint, e.g. "
                   "http://127.0.0.1:8765/agents/demo")
    p.add_argument("--prompt", default=DEFAULT_PROMPT,
                   help="the user message of each run (default: %(default)r)")
    p.add_argument("--forwarded-props", type=json_object, default=DEFAULT_PROPS, metavar="JSON",
                   help="forwardedProps of each run (default: a short demo-agent run, "
                        f"{json.dumps(DEFAULT_PROPS)})")
    p.add_argument("--approval-prompt", default=DEFAULT_APPROVAL_PROMPT,
                   help="the user message of a run that asks for approval")
    p.add_argument("--approval-forwarded-props", type=json_object, metavar="JSON",
                   default=DEFAULT_APPROVAL_PROPS,
                   help="forwardedProps of a run that asks for approval (default: "
                        f"{json.dumps(DEFAULT_APPROVAL_PROPS)})")
    p.add_argument("--approval-payload", type=json_object, default={"approved": True},
                   metavar="JSON", help="the payload that answers it (default: "
                                        '{"approved": true})')
    p.add_argument("--restart-cmd", metavar="CMD",
                   help="a shell command that kills and restarts the server; enables the "
                        "restart check")
    p.add_argument("--header", type=_header, action="append", default=[],
                   metavar="'NAME: VALUE'", help="send this header with every request "
                                                "(repeatable)")
    p.add_argument("--token", help="bearer token (an Authorization header)")
    p.add_argument("--check", action="append", choices=list(CHECKS), metavar="ID",
                   help="run only this check (repeatable): " + ", ".join(CHECKS))
    p.add_argument("--timeout", type=_seconds, default=30.0, metavar="S",
                   help="the longest one run may take (default: %(default)s)")
    p.add_argument("--cancel-within", type=_seconds, default=1.0, metavar="S",
                   help="how soon a cancelled run must end (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--verbose", action="store_true",
                   help="print every check's evidence, not only failures'")


def problem(ns: argparse.Namespace) -> str | None:
    """A usage mistake in words, or None."""
    url: str = ns.url
    if not url.startswith(("http://", "https://")):
        return f"URL must start with http:// or https:// (got {url!r})"
    return None


def run(ns: argparse.Namespace) -> int:
    """Run the checks, print the report; 0 when no check failed."""
    from outlast.conformance import Options, check

    headers = dict(ns.header)
    if ns.token:
        headers["Authorization"] = f"Bearer {ns.token}"
    report = check(Options(
        url=ns.url, prompt=ns.prompt, forwarded_props=ns.forwarded_props,
        approval_prompt=ns.approval_prompt,
        approval_forwarded_props=ns.approval_forwarded_props,
        approval_payload=ns.approval_payload, restart_cmd=ns.restart_cmd,
        headers=headers, timeout=ns.timeout, cancel_within=ns.cancel_within,
        only=ns.check))
    if ns.json:
        print(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        print(report.text(verbose=ns.verbose))
    sys.stdout.flush()
    return 1 if report.failed else 0
