"""Opaque, principal-scoped page cursors for the list of threads.

A cursor is the keyset position ``(updated_at, thread id)`` of the last thread
of a page, with a tag derived from the principal, as urlsafe base64 of JSON. It
reveals only what its principal already sees (their own thread's id and time), not
internal keys that would hint how many threads the service holds; another
principal's cursor is refused, so it cannot be used to probe positions either.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math

from outlast.errors import InvalidRequest

_BAD = "cursor is not one this server returned for this caller"


def _tag(principal: str) -> str:
    return hashlib.sha256(b"outlast-thread-cursor\0" + principal.encode("utf-8")).hexdigest()[:16]


def encode_thread_cursor(principal: str, updated_at: float, thread_id: str) -> str:
    """The cursor that continues after the thread ``(updated_at, thread_id)`` of ``principal``."""
    raw = json.dumps([updated_at, thread_id, _tag(principal)], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii").rstrip("=")


def decode_thread_cursor(principal: str, cursor: str) -> tuple[float, str]:
    """The keyset position in ``cursor``; InvalidRequest if it is malformed or not
    one made for ``principal``."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        updated_at, thread_id, tag = json.loads(raw)
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError):
        raise InvalidRequest(_BAD) from None
    if (not isinstance(updated_at, int | float) or isinstance(updated_at, bool)
            or not math.isfinite(updated_at) or not isinstance(thread_id, str)
            or tag != _tag(principal)):
        raise InvalidRequest(_BAD)
    return float(updated_at), thread_id
