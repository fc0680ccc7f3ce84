"""The one error the client raises: the service's refusal, or a service out of reach."""

from __future__ import annotations

from typing import Any

import httpx

from outlast import errors

# The service could not be reached within the client's retry budget.
UNREACHABLE = "unreachable"
# Answers worth retrying: a proxy in front of a restarting service, or a draining one.
RETRY_STATUSES = frozenset({502, 503, 504})


class OutlastError(errors.OutlastError):
    """A request the service refused (``code``, ``message`` and ``status`` from its
    answer, spec §3) or could not be reached for (``code = "unreachable"``, no status)."""

    def __init__(self, code: str, message: str, status: int | None = None,
                 fields: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.fields = dict(fields or {})  # the answer's other error fields, as sent

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    @property
    def retryable(self) -> bool:
        """True for answers a later attempt may not get (the service restarting)."""
        return self.status in RETRY_STATUSES


def from_response(resp: httpx.Response) -> OutlastError:
    """The error a ``>= 400`` response carries (its body must have been read)."""
    try:
        body = resp.json()
        err = body["error"]
        code, message = str(err["code"]), str(err["message"])
        fields = {k: v for k, v in err.items() if k not in ("code", "message")}
    except (ValueError, KeyError, TypeError):
        # Not our shape: a proxy or something else on that port answered.
        text = resp.text.strip().splitlines()[0][:200] if resp.text.strip() else ""
        return OutlastError(f"http_{resp.status_code}",
                            text or resp.reason_phrase or "no message", resp.status_code)
    return OutlastError(code, message, resp.status_code, fields)
