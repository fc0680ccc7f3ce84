"""Standard Webhooks signatures: ``webhook-id``, ``webhook-timestamp`` and
``webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">``."""

from __future__ import annotations

import base64
import hashlib
import hmac


def signature(key: bytes, webhook_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value of ``body`` sent as ``webhook_id`` at ``timestamp``."""
    signed = webhook_id.encode() + b"." + str(timestamp).encode() + b"." + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signed_headers(key: bytes, webhook_id: str, timestamp: int,
                   body: bytes) -> dict[str, str]:
    """The headers of one attempt. The id stays the same on every retry (receivers
    deduplicate by it); the timestamp is the attempt's, so a retry hours later still
    passes a receiver's freshness check."""
    return {
        "content-type": "application/json",
        "webhook-id": webhook_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(key, webhook_id, timestamp, body),
    }
