"""Domain errors. They carry structured fields and know nothing of HTTP.

The HTTP edge maps each ``code`` to a status in exactly one place
(``outlast.http.errors``).
"""

from __future__ import annotations

from typing import Any


class OutlastError(Exception):
    """Root of every error outlast raises on purpose."""

    code = "internal"

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields


class InvalidRequest(OutlastError):
    """The request is malformed or breaks a documented limit."""

    code = "invalid_request"


class PayloadTooLarge(OutlastError):
    """A body or an emitted event is over its size limit."""

    code = "payload_too_large"


class InvalidLastEventId(OutlastError):
    """``Last-Event-ID`` (or ``?after=``) is not a usable ``seq``."""

    code = "invalid_last_event_id"


class Unauthorized(OutlastError):
    """No credentials, or credentials that map to no principal."""

    code = "unauthorized"


class NotFound(OutlastError):
    """A resource does not exist for this principal (existence never leaks)."""

    code = "not_found"


class RunNotFound(NotFound):
    """No run with this id for this principal."""

    code = "run_not_found"


class ThreadNotFound(NotFound):
    """No thread with this id for this principal."""

    code = "thread_not_found"


class AgentNotFound(NotFound):
    """No agent registered under this name."""

    code = "agent_not_found"


class RunAlreadyActive(OutlastError):
    """The thread has an active run and the multitask policy is ``reject``."""

    code = "run_already_active"


class RunIdConflict(OutlastError):
    """The ``runId`` is already used by another request or thread."""

    code = "run_id_conflict"


class ThreadBusy(OutlastError):
    """The thread has an active run and the operation needs it idle."""

    code = "thread_busy"


class InterruptNotPending(OutlastError):
    """An answered interrupt is no longer pending (answered, cancelled or expired)."""

    code = "interrupt_not_pending"


class InterruptExpired(OutlastError):
    """An interrupt's ``expiresAt`` has passed; it can only be cancelled."""

    code = "interrupt_expired"


class ResumeIncomplete(OutlastError):
    """The thread has pending interrupts the request does not answer."""

    code = "resume_incomplete"


class IdempotencyConflict(OutlastError):
    """The idempotency key was used before with a different request body."""

    code = "idempotency_key_reused"


class Draining(OutlastError):
    """The process is shutting down and admits no new runs."""

    code = "draining"


class StoreUnavailable(OutlastError):
    """The store cannot write now: it is out of memory or connections, or the connection
    to it is lost. Nothing of the request was stored; retry after ``retry_after`` s."""

    code = "store_unavailable"
    retry_after = 5


class StorageFull(StoreUnavailable):
    """The store's disk is full: nothing of the request was stored; retry once space
    is freed."""

    code = "storage_full"


class LeaseLost(OutlastError):
    """This process no longer holds the run's lease and must stop writing to it."""

    code = "lease_lost"


class LimitExceeded(OutlastError):
    """A principal is at one of its limits (runs at once, runs per minute, tokens per
    day): nothing was stored; retry after ``retry_after`` seconds."""

    code = "limit_exceeded"

    def __init__(self, message: str, retry_after: int, **fields: Any) -> None:
        super().__init__(message, retryAfter=retry_after, **fields)
        self.retry_after = retry_after


class InvalidAnswer(OutlastError):
    """An answer to an interrupt does not have the shape the interrupt asks for."""

    code = "invalid_answer"


class MissingDependency(OutlastError):
    """An optional dependency is needed; the message names the extra to install."""

    code = "missing_dependency"

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package} is not installed; install it with: pip install \"outlast[{extra}]\"",
            package=package,
            extra=extra,
        )


class RunCompacted(OutlastError):
    """Retention removed the run's events (spec §6); its record and the thread's
    snapshot remain."""

    code = "run_compacted"


class Forbidden(OutlastError):
    """The caller is known but may not do this (an admin operation, say)."""

    code = "forbidden"
# -- fork ------------------------------------------------------------------


class HistoryDiverged(OutlastError):
    """The input carries a message whose id the thread holds with other content: the
    server never silently keeps one of two versions (fork to edit instead)."""

    code = "history_diverged"


class ThreadIdConflict(OutlastError):
    """The principal already has a thread with the id a new thread (a fork) asks for."""

    code = "thread_id_conflict"


class ForkPointCompacted(OutlastError):
    """The events needed to rebuild an older fork point were removed by retention."""

    code = "run_compacted"
