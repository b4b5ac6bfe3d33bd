"""Time as the store sees it: integer epoch milliseconds, injectable for tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

EpochMs = int
Clock = Callable[[], EpochMs]


def system_clock() -> EpochMs:
    return time.time_ns() // 1_000_000


def epoch_ms(moment: str) -> EpochMs:
    """The inverse of `iso`: ISO-8601 (with Z or an offset) -> epoch milliseconds."""
    return int(datetime.fromisoformat(moment).timestamp() * 1000)


def iso(at: EpochMs) -> str:
    """ISO-8601 UTC with milliseconds, e.g. 2026-11-30T06:50:58.123Z."""
    return datetime.fromtimestamp(at / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
