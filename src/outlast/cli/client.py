"""``outlast threads|thread|runs|run|tail|cancel|answer|fork``: inspect and control a
running service, for people, built on ``outlast.client``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from outlast.cli.render import (
    Style,
    TailPrinter,
    run_text,
    runs_table,
    thread_text,
    threads_table,
)
from outlast.client import Client, OutlastError
from outlast.client.aio import DEFAULT_URL

# A one-off command gives up quickly on a service that is not there; following a run
# rides out restarts (G8 resumes the run; the stream resumes after its last seq).
QUICK_RETRY_FOR = 3.0
FOLLOW_RETRY_FOR = 300.0

COMMON_HELP = f"""
Every command takes --url (or OUTLAST_URL, default {DEFAULT_URL}) and --token
(or OUTLAST_TOKEN), and --json to print the service's JSON instead of text."""


def version_text() -> str:
    """``outlast --version``."""
    try:
        return f"outlast {version('outlast')}"
    except PackageNotFoundError:
        return "outlast (unknown version)"


def json_object(text: str) -> dict[str, Any]:
    """An argument that must be a JSON object (argparse's ``type=``)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # plain text is a result too


def _boundary(text: str) -> tuple[str, int]:
    run_id, sep, seq = text.rpartition(":")
    if not sep or not run_id or not seq.isdigit():
        raise argparse.ArgumentTypeError("must be RUN_ID:SEQ")
    return run_id, int(seq)


def _connection_options(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """``--url``, ``--token`` and ``--json``: after a client command, or before it (then
    held as ``before_*`` until ``resolve_connection``, since a subcommand's defaults
    would otherwise overwrite what was given before it)."""
    p.add_argument("--url", dest=f"{prefix}url", default=None, metavar="URL",
                   help=f"the service (default: $OUTLAST_URL or {DEFAULT_URL})")
    p.add_argument("--token", dest=f"{prefix}token", default=None,
                   help="bearer token (default: $OUTLAST_TOKEN)")
    p.add_argument("--json", dest=f"{prefix}json", action="store_true", default=False,
                   help="print JSON, one object a line")


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """Accept ``--url``, ``--token`` and ``--json`` before the command too
    (``outlast --url U threads``)."""
    _connection_options(parser, prefix="before_")


def resolve_connection(ns: argparse.Namespace) -> str | None:
    """Settle ``--url``, ``--token`` and ``--json`` (after the command, else before it,
    else the environment); what is wrong with them, or None."""
    before = {k: getattr(ns, f"before_{k}", None) for k in ("url", "token", "json")}
    if not hasattr(ns, "url"):  # not a client command
        if before["json"] and hasattr(ns, "json"):
            ns.json, before["json"] = True, None  # e.g. ``outlast --json check URL``
        given = [f"--{k}" for k, v in before.items() if v]
        if not given:
            return None
        verb = "goes" if len(given) == 1 else "go"
        return f"{' and '.join(given)} {verb} with the client commands, not {ns.command}"
    # A value equal to the environment's is a default (``gc`` fills its own in).
    env = {"url": os.environ.get("OUTLAST_URL", DEFAULT_URL),
           "token": os.environ.get("OUTLAST_TOKEN")}
    for k, default in env.items():
        after = getattr(ns, k)
        if after is None or after == default:
            setattr(ns, k, before[k] or default or (DEFAULT_URL if k == "url" else None))
    ns.json = bool(getattr(ns, "json", False) or before["json"])
    return None


def add_commands(sub: Any) -> None:
    """Register the inspect and control commands on ``outlast``'s subparsers."""

    def command(name: str, purpose: str, example: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(
            name, help=purpose, description=purpose + ".",
            epilog=f"example:\n  {example}\n{COMMON_HELP}",
            formatter_class=argparse.RawDescriptionHelpFormatter)
        _connection_options(p)
        return p

    p = command("threads", "List your threads, newest first", "outlast threads --status busy")
    p.add_argument("--status", choices=["idle", "busy", "interrupted", "error"])
    p = command("thread", "Show a thread's conversation, pending approvals and active run",
                "outlast thread t1")
    p.add_argument("thread_id")
    p = command("runs", "List a thread's runs, newest first", "outlast runs t1")
    p.add_argument("thread_id")
    p = command("run", "Show a run's status, outcome and pending approvals", "outlast run r1")
    p.add_argument("run_id")
    p = command("tail", "Follow a run as it happens, resuming across disconnects and "
                "restarts", "outlast tail r1 --after 40")
    p.add_argument("run_id")
    p.add_argument("--after", type=int, default=0, metavar="SEQ",
                   help="start after this seq (default: from the start)")
    p = command("cancel", "Stop a run", "outlast cancel r1 --wait")
    p.add_argument("run_id")
    p.add_argument("--wait", action="store_true", help="return once the run has ended")
    p = command("answer", "Approve or deny a thread's pending tool calls, or say whether a "
                "tool cut off by a crash happened, starting the continuation run",
                "outlast answer t1 --approve --args '{\"target\": \"b.py\"}' --follow")
    p.add_argument("thread_id")
    verdict = p.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--approve", action="store_true")
    verdict.add_argument("--deny", action="store_true")
    verdict.add_argument("--happened", action="store_true",
                         help="a tool cut off by a crash did happen (give --result)")
    verdict.add_argument("--run-again", action="store_true",
                         help="a tool cut off by a crash should run again")
    verdict.add_argument("--fail", action="store_true",
                         help="a tool cut off by a crash: fail the run, run nothing")
    p.add_argument("--args", type=json_object, metavar="JSON",
                   help="edited tool arguments, as a JSON object")
    p.add_argument("--result", type=_json_value, metavar="JSON",
                   help="with --happened: what the tool returned (JSON; a bare word is text)")
    p.add_argument("--interrupt", dest="interrupts", action="append", metavar="ID",
                   help="answer only this interrupt (repeatable; default: every pending one)")
    p.add_argument("--follow", action="store_true", help="then tail the continuation run")
    p = command("fork", "Branch a thread into a new one at a safe boundary",
                "outlast fork t1 --before-message m7 --thread-id t1-retry")
    p.add_argument("thread_id")
    p.add_argument("--thread-id", dest="new_thread_id", metavar="ID",
                   help="the new thread's id (default: the service picks one)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--as-of", type=_boundary, metavar="RUN_ID:SEQ",
                       help="the boundary to branch at (default: the latest)")
    where.add_argument("--before-message", metavar="MESSAGE_ID",
                       help="the boundary just before this message (edit and regenerate)")


def _doubt(ns: argparse.Namespace) -> str | None:
    """The answer about a tool cut off by a crash that ``outlast answer`` gives, if any."""
    if ns.command != "answer":
        return None
    return "happened" if ns.happened else "run_again" if ns.run_again else \
        "fail" if ns.fail else None


def problem(ns: argparse.Namespace) -> str | None:
    """What is wrong with options argparse cannot check alone, or None."""
    if ns.command != "answer":
        return None
    doubt = _doubt(ns)
    if (ns.result is not None) != (doubt == "happened"):
        return "answer: --result goes with --happened, and --happened needs it"
    if ns.args is not None and not ns.approve:
        return "answer: --args goes with --approve"
    return None


def run(ns: argparse.Namespace) -> int:
    """Run one parsed command; the process's exit status (1 for a refusal)."""
    style = Style.for_stream(sys.stdout)
    follow = ns.command == "tail" or getattr(ns, "follow", False)
    handler = _note_reconnects(Style.for_stream(sys.stderr), logging.INFO if follow
                               else logging.WARNING)
    try:
        with Client(ns.url, ns.token,
                    retry_for=FOLLOW_RETRY_FOR if follow else QUICK_RETRY_FOR) as client:
            HANDLERS[ns.command](client, ns, style)
    except OutlastError as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `outlast tail r1 | head`: the reader left; nothing more to say.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        logging.getLogger("outlast.client").removeHandler(handler)
    return 0


def _note_reconnects(style: Style, level: int) -> logging.Handler:
    """A followed run's reconnections show as a dim note on stderr (a one-off command's
    retries only as its final error)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(style.dim("note: %(message)s")))
    log = logging.getLogger("outlast.client")
    log.addHandler(handler)
    log.setLevel(level)
    log.propagate = False
    return handler


def _emit(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False), flush=True)


def _threads(c: Client, ns: argparse.Namespace, style: Style) -> None:
    threads = c.threads(ns.status)
    if ns.json:
        for t in threads:
            _emit(t.raw)
    elif threads:
        print(threads_table(threads, style))
    else:
        print(style.dim("no threads"))


def _thread(c: Client, ns: argparse.Namespace, style: Style) -> None:
    t = c.thread(ns.thread_id)
    if ns.json:
        _emit(t.raw)
    else:
        print(thread_text(t, style))


def _runs(c: Client, ns: argparse.Namespace, style: Style) -> None:
    runs = c.runs(ns.thread_id)
    if ns.json:
        for r in runs:
            _emit(r.raw)
    else:
        print(runs_table(runs, style))


def _run(c: Client, ns: argparse.Namespace, style: Style) -> None:
    r = c.run_record(ns.run_id)
    if ns.json:
        _emit(r.raw)
    else:
        print(run_text(r, style))


def _tail(c: Client, ns: argparse.Namespace, style: Style) -> None:
    tail(c, ns.run_id, ns.after, as_json=ns.json, style=style)


def tail(c: Client, run_id: str, after: int, *, as_json: bool, style: Style) -> None:
    """Print the run's stored events after ``after`` until its final event."""
    printer = TailPrinter(sys.stdout, style)
    # A reconnection note (stderr) ends the line being streamed first: the terminal
    # shows both streams, and the note must not land in the middle of a message.
    notes = _BreakLineFirst(printer)
    handlers = list(logging.getLogger("outlast.client").handlers)
    for h in handlers:
        h.addFilter(notes)
    try:
        for seq, event in c.events(run_id, after):
            if as_json:
                _emit({"seq": seq, "event": event})
            else:
                printer.event(event)
    finally:
        for h in handlers:
            h.removeFilter(notes)
        if not as_json:
            printer.close()


class _BreakLineFirst(logging.Filter):
    """Lets every record through, having ended the printer's unfinished line."""

    def __init__(self, printer: TailPrinter) -> None:
        super().__init__()
        self.printer = printer

    def filter(self, record: logging.LogRecord) -> bool:
        self.printer.break_line()
        return True


def _cancel(c: Client, ns: argparse.Namespace, style: Style) -> None:
    r = c.cancel(ns.run_id, wait=ns.wait)
    if ns.json:
        _emit(r.raw)
    else:
        print(f"run {r.run_id}: {r.status if r.final else 'cancelling'}")


def _answer(c: Client, ns: argparse.Namespace, style: Style) -> None:
    doubt = _doubt(ns)
    payload = None if doubt is None else \
        {"answer": doubt, **({"result": ns.result} if doubt == "happened" else {})}
    handle = c.answer(ns.thread_id, bool(ns.approve), ns.args, interrupts=ns.interrupts,
                      payload=payload)
    if ns.json:
        _emit({"runId": handle.run_id, "threadId": handle.thread_id,
               "replayed": handle.replayed})
    else:
        verdict = {"happened": "it happened", "run_again": "run it again",
                   "fail": "fail the run"}.get(doubt or "", "approved" if ns.approve
                                               else "denied")
        print(style.dim(f"{verdict}; continuation run {handle.run_id}"))
    if ns.follow:
        tail(c, handle.run_id, 0, as_json=ns.json, style=style)


def _fork(c: Client, ns: argparse.Namespace, style: Style) -> None:
    t = c.fork(ns.thread_id, ns.new_thread_id, as_of=ns.as_of,
               before_message_id=ns.before_message)
    if ns.json:
        _emit(t.raw)
    else:
        print(f"forked {ns.thread_id} into {t.thread_id} ({len(t.messages)} messages)")


HANDLERS: dict[str, Callable[[Client, argparse.Namespace, Style], None]] = {
    "threads": _threads, "thread": _thread, "runs": _runs, "run": _run, "tail": _tail,
    "cancel": _cancel, "answer": _answer, "fork": _fork,
}
