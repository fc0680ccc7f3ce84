"""The limits file (``--limits-file``): limits per principal, read and checked."""

from __future__ import annotations

import json

LIMIT_KEYS = {"activeRuns": "active_runs", "runsPerMinute": "runs_per_minute",
              "tokensPerDay": "tokens_per_day"}


def parse_limits(text: str) -> dict[str, dict[str, int]]:
    """A limits file's overrides by principal; ValueError saying what is wrong."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError('expected an object of principals: {"alice": {"activeRuns": 2}}')
    out: dict[str, dict[str, int]] = {}
    for principal, limits in data.items():
        if not isinstance(limits, dict):
            raise ValueError(f"{principal}: expected an object of limits")
        for key, value in limits.items():
            if key not in LIMIT_KEYS:
                raise ValueError(f"{principal}.{key}: not one of {', '.join(LIMIT_KEYS)}")
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{principal}.{key}: expected a count, 0 for no limit")
        out[principal] = {LIMIT_KEYS[k]: v for k, v in limits.items()}
    return out
