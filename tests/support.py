"""Test helpers shared by unit and integration tests."""

from __future__ import annotations


class ManualClock:
    """A clock tests move by hand (epoch milliseconds)."""

    def __init__(self, start: int = 1_800_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)
