"""Testing job handlers: `JobHarness` runs a job type's handler through claim, attempts, retries, timeouts,
cancels and crashes on the in-memory job store with a manual clock, in the test's own thread, in
milliseconds per job; `JobRecord` is what a test reads and asserts of a job (its state, result, error and
run records). The guide: docs/testing-handlers.md.

    from onward.testing import JobHarness
    from myapp.jobs import registry

    def test_export_retries_then_succeeds():
        record = JobHarness(registry).run("reports.export", {"month": "2026-11"}, max_attempts=3)
        record.assert_succeeded()
        record.assert_outcomes(["failed", "succeeded"])
"""

from onward.domain.clock import ManualClock
from onward.testing.harness import DEFAULT_TENANT, JobHarness, NotSettled
from onward.testing.records import OPEN, JobRecord
from onward.testing.timeline import AttemptCut, TimeAlreadyMoving

__all__ = ["DEFAULT_TENANT", "OPEN", "AttemptCut", "JobHarness", "JobRecord", "ManualClock", "NotSettled",
           "TimeAlreadyMoving"]
