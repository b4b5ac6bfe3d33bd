"""Time as the store sees it: integer epoch milliseconds, injectable for tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

EpochMs = int
Clock = Callable[[], EpochMs]


def system_clock() -> EpochMs:
    return time.time_ns() // 1_000_000


class ManualClock:
    """A clock moved by hand (epoch milliseconds): tests and onward.testing's harness give it to a JobStore."""

    def __init__(self, start: EpochMs = 1_800_000_000_000) -> None:
        self.now = start

    def __call__(self) -> EpochMs:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)


def epoch_ms(moment: str) -> EpochMs:
    """The inverse of `iso`: ISO-8601 (with Z or an offset) -> epoch milliseconds."""
    return int(datetime.fromisoformat(moment).timestamp() * 1000)


def parse_instant(text: str) -> EpochMs:
    """A moment a person typed (RFC 3339 / ISO-8601 with a zone: `2026-11-30T08:00:00Z`, `...+02:00`) as
    epoch milliseconds. ValueError for anything else: a time without a zone names no moment at all."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO-8601 time such as 2026-11-30T08:00:00Z") from None
    if "T" not in text.upper() and " " not in text.strip():
        raise ValueError(f"{text!r} is a date; give a time with its zone, such as {text.strip()}T00:00:00Z")
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no zone; add Z (UTC) or an offset such as +02:00")
    return int(moment.timestamp() * 1000)


def iso(at: EpochMs) -> str:
    """ISO-8601 UTC with milliseconds, e.g. 2026-11-30T06:50:58.123Z."""
    if type(at) is not int:  # (a float: its rounding to the microsecond is datetime's)
        return _iso_by_datetime(at)
    second, millisecond = divmod(at, 1000)
    written = _second_written
    if written[0] != second:  # the same second's text again for every stamp within it (one swap: thread-safe)
        written = _keep_second(second)
    return f"{written[1]}.{millisecond:03d}Z"


def _iso_by_datetime(at: float) -> str:
    return datetime.fromtimestamp(at / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


_second_written: tuple[int, str] = (0, "1970-01-01T00:00:00")  # an epoch second and its text


def _keep_second(second: int) -> tuple[int, str]:
    global _second_written
    _second_written = (second, datetime.fromtimestamp(second, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return _second_written
