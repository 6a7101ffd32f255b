"""Capped exponential delays, never past a deadline: how the client waits before it retries
what is transient (a dropped connection, a restarting server, a busy heavy request)."""

from __future__ import annotations

import time

BACKOFF_FIRST = 0.05
BACKOFF_CAP = 1.0


class Backoff:
    """Capped exponential delays, never past a deadline."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.delay = BACKOFF_FIRST

    def sleep(self) -> bool:
        """Sleep the next delay; False (without sleeping) when the deadline has passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(self.delay, left))
        self.delay = min(self.delay * 2, BACKOFF_CAP)
        return True

    def reset(self) -> None:
        self.delay = BACKOFF_FIRST
