"""The server's log: one line per record, as text or JSON, each line about a run
carrying its run id, thread id, attempt and principal, and no secret ever.

The run's identity travels in a context variable (``about_run``) that an execution
sets for its task; the tasks it starts, the agent's among them, inherit it, so an
agent's own ``logging`` calls carry it too. A redaction filter replaces every
secret the server knows (access tokens, webhook secrets, API keys from its
environment) and anything shaped like a bearer credential, in the message and in
tracebacks alike.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

LogFormat = Literal["text", "json"]


@dataclass(frozen=True)
class RunIdentity:
    """What a log line about a run says of it."""

    run_id: str
    thread_id: str
    attempt: int
    principal: str


_RUN: ContextVar[RunIdentity | None] = ContextVar("outlast_run", default=None)
FIELDS = ("run_id", "thread_id", "attempt", "principal")


@contextlib.contextmanager
def about_run(run_id: str, thread_id: str, attempt: int, principal: str
              ) -> Iterator[None]:
    """Every record logged inside (and in tasks started inside) is about this run."""
    token = _RUN.set(RunIdentity(run_id, thread_id, attempt, principal))
    try:
        yield
    finally:
        _RUN.reset(token)


def of_run(run: Any) -> dict[str, object]:
    """``extra=`` for a line about a run (a ``RunRecord``) logged outside its execution."""
    return {"run_id": run.id, "thread_id": run.thread_id, "attempt": run.attempts,
            "principal": run.principal}


class RunFields(logging.Filter):
    """Puts the current run's identity on each record (unless given with ``extra``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        run = _RUN.get()
        for name in FIELDS:
            if not hasattr(record, name):
                setattr(record, name, getattr(run, name) if run is not None else None)
        return True


# Credentials whatever their source: an Authorization header's value, an API key's
# usual shapes, a Standard Webhooks secret.
_SHAPES = re.compile(
    r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"
    r"|\b(sk|pk|rk)-[A-Za-z0-9_-]{12,}"
    r"|\bwhsec_[A-Za-z0-9+/=]{8,}")
# Environment variables whose values are secrets by name.
_SECRET_NAMES = re.compile(r"(?i)(key|token|secret|password|passwd|credential)")


class Redactor(logging.Filter):
    """Replaces every known secret, and anything shaped like one, with ``[redacted]``.

    It renders the record (message and traceback) once, redacted, so that no
    handler formats the raw arguments again."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)

    def add(self, secrets: Iterable[str]) -> None:
        """Know these secrets too (from a file read after start-up)."""
        self.secrets = sorted({*self.secrets, *(s for s in secrets if len(s) >= 6)},
                              key=len, reverse=True)

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, "[redacted]")
        return _SHAPES.sub(lambda m: (m.group(1) or "") + "[redacted]", text)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.msg, record.args = self.scrub(message), None
        if record.exc_text:
            record.exc_text = self.scrub(record.exc_text)
        record.exc_info = None  # formatted (and scrubbed) above
        return True


def environment_secrets() -> list[str]:
    """Values of this process's environment whose names say they are secrets."""
    return [v for k, v in os.environ.items() if _SECRET_NAMES.search(k) and v]


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message [run=… thread=… attempt=… principal=…]``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        run_id = getattr(record, "run_id", None)
        if run_id is None:
            return line
        about = (f" [run={run_id} thread={getattr(record, 'thread_id', None)} "
                 f"attempt={getattr(record, 'attempt', None)} "
                 f"principal={getattr(record, 'principal', None)}]")
        head, sep, tail = line.partition("\n")
        return head + about + sep + tail


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the run's identity when
    the line is about one, and the traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                    + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(), "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["traceback"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure(fmt: LogFormat, level: str, secrets: Iterable[str] = ()) -> Redactor:
    """The process's logging: one stderr handler in ``fmt``; ``outlast`` loggers (and
    agents' own, through the root) at ``level``. Returns the redactor, to which
    secrets learned later are added."""
    redactor = Redactor([*secrets, *environment_secrets()])
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RunFields())
    handler.addFilter(redactor)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("outlast").setLevel(level.upper())
    # Libraries that log through their own handlers (uvicorn) go through ours.
    for name in ("uvicorn", "uvicorn.error"):
        lib = logging.getLogger(name)
        lib.handlers = []
        lib.propagate = True
    return redactor
