"""Retry delay: capped exponential backoff with jitter (pure): equal jitter by default, full or none on request."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class BackoffPolicy:
    base_s: float = 1.0
    cap_s: float = 300.0
    # "equal": in [ceiling/2, ceiling]; "full": in [0, ceiling]; "none": the ceiling (retry policies, issue 37)
    jitter: Literal["full", "equal", "none"] = "equal"

    def ceiling(self, attempt: int) -> float:
        """The largest delay after failed attempt number `attempt` (1-based): base * 2^(attempt-1), capped."""
        if attempt < 1:
            raise ValueError("attempt numbers start at 1")
        growth: int = 2 ** min(attempt - 1, 64)  # a non-negative exponent: an int
        return min(self.cap_s, self.base_s * growth)

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """A delay never past the cap; with equal jitter (the default) in [ceiling/2, ceiling], never zero (no
        thundering retry)."""
        ceiling = self.ceiling(attempt)
        if self.jitter == "none":
            return ceiling
        if self.jitter == "full":
            return (rng or random).uniform(0, ceiling)
        return ceiling / 2 + (rng or random).uniform(0, ceiling / 2)
