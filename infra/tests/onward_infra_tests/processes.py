"""Whether a process has ended, now or within a time: for the tests of processes the local stack and the
workers start (execution environments, job processes, worker processes)."""

from __future__ import annotations

import time
from pathlib import Path


def gone(pid: int) -> bool:
    """The process has ended (a zombie waiting for a parent that is not ours to reap counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def eventually_gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while not gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
