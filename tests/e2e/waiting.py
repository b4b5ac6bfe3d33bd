"""Waiting in the end-to-end tests for what another process does (a job's state, a task's protection)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], object], timeout_s: float, what: str, every_s: float = 0.05) -> None:
    """Until `predicate()` holds; an AssertionError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every_s)
