"""Backoff with jitter inside a time budget, for reconnects and retried requests."""

from __future__ import annotations

import random
import time


class Backoff:
    """Exponential delays with jitter; the budget counts from the first failure since the
    last success, so a long run with occasional drops never runs out of it."""

    def __init__(self, budget: float, *, base: float = 0.1, cap: float = 5.0) -> None:
        self.budget = budget
        self.base = base
        self.cap = cap
        self.failures = 0
        self._since: float | None = None

    def reset(self) -> None:
        """Progress was made: the next failure starts a fresh budget."""
        self.failures = 0
        self._since = None

    def next_delay(self) -> float | None:
        """The delay before the next attempt, or None once the budget is spent."""
        now = time.monotonic()
        if self._since is None:
            self._since = now
        elapsed = now - self._since
        if elapsed >= self.budget:
            return None
        # Jitter spreads the reconnects of many clients after one server restart.
        delay = min(self.cap, self.base * 2.0 ** self.failures) * random.uniform(0.5, 1.0)
        self.failures += 1
        return min(delay, max(0.0, self.budget - elapsed))
