"""Snooze (issue 37): a handler's way to say "run me again in N seconds" without spending an attempt.

    from onward.runtime.worker import Snooze

    @registry.register("report.fetch")
    def fetch(context):
        if not upstream_ready():
            raise Snooze(30)  # back in the queue, due in 30 s; this attempt is not charged
        ...

The attempt ends at once: its run record's outcome is `snoozed`, and the job is queued again, due `seconds`
from now (explain: "snoozed until T"). A job may snooze at most its type's `RetryPolicy.max_snoozes` times
(100 by default); past that a snooze is a failed attempt (error type SnoozeLimit), charged and retried as any
failure. docs/handlers.md#snooze.
"""

from __future__ import annotations

from onward.domain.retry_policy import MAX_SNOOZE_S, check_snooze_s

__all__ = ["MAX_SNOOZE_S", "Snooze"]


class Snooze(Exception):
    """Raise from a handler to run the job again `seconds` from now (above 0, at most MAX_SNOOZE_S: 7 days),
    not charging the attempt. ValueError at once for a length out of range (the attempt then fails as any
    exception fails it)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = check_snooze_s(seconds)
        super().__init__(f"snoozed for {self.seconds:g} s")
