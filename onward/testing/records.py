"""What a test reads of a job the harness ran: `JobRecord`, the store's own records of it, with assertions
whose failure says what every attempt came to."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from onward.domain.models import ErrorSummary, Job, OutboxEvent, Run
from onward.domain.states import JobState, RunOutcome

OPEN = "open"  # the outcome read for an attempt not closed yet (its worker crashed; the lease not yet lapsed)
_ANY: Any = object()


@dataclass(frozen=True)
class JobRecord:
    """A job as the store holds it: its row (`job`), one run record per attempt in attempt order (`runs`:
    outcome, error, claimed and finished times, the worker), the stored result (None until it succeeded) and
    its outbox events in version order (`events`: what the status view is built from)."""

    job: Job
    runs: tuple[Run, ...]
    result: Any
    events: tuple[OutboxEvent, ...]

    @property
    def job_id(self) -> str:
        return self.job.job_id

    @property
    def state(self) -> JobState:
        return self.job.state

    @property
    def error(self) -> ErrorSummary | None:
        """Why the job waits to retry or ended dead / quarantined: its last attempt's error (None once it
        succeeded)."""
        return self.job.last_error

    @property
    def outcomes(self) -> list[str]:
        """Each attempt's outcome in order: succeeded, failed, lease_expired, released, cancelled, fenced (a
        zombie's late report), or `open` for an attempt still holding its lease."""
        return [run.outcome.value if run.outcome is not None else OPEN for run in self.runs]

    @property
    def errors(self) -> list[ErrorSummary | None]:
        """Each attempt's error (error_type: the exception's class name, message), None where it had none."""
        return [run.error for run in self.runs]

    @property
    def fencing_tokens(self) -> list[str]:
        """The fencing token each attempt's handler got (`<job_id>:<attempt>`)."""
        return [f"{run.job_id}:{run.attempt}" for run in self.runs]

    @property
    def statuses(self) -> list[str]:
        """The job's state after each committed transition, in order (its outbox events): e.g. queued,
        running, retry_wait, running, succeeded."""
        return [event.status.value for event in self.events]

    def describe(self) -> str:
        """One line per attempt: what a failed assertion shows."""
        lines = [f"job {self.job_id} ({self.job.type}) is {self.state.value}"
                 + (f", last error {_error(self.error)}" if self.error else "")
                 + f"; {len(self.runs)} attempt(s):"]
        for run in self.runs:
            outcome = run.outcome.value if run.outcome is not None else OPEN
            lines.append(f"  attempt {run.attempt}: {outcome}" + (f" ({_error(run.error)})" if run.error else ""))
        return "\n".join(lines)

    def assert_state(self, state: JobState | str) -> None:
        if self.state != JobState(state):
            raise AssertionError(f"expected {JobState(state).value}: {self.describe()}")

    def assert_succeeded(self, result: Any = _ANY) -> None:
        """It succeeded (and, when `result` is given, stored that result)."""
        self.assert_state(JobState.SUCCEEDED)
        if result is not _ANY and self.result != result:
            raise AssertionError(f"expected the result {result!r}, stored {self.result!r}: {self.describe()}")

    def assert_outcomes(self, outcomes: Sequence[str | RunOutcome]) -> None:
        """Its attempts ended so, in order (e.g. ["failed", "succeeded"])."""
        expected = [str(outcome) for outcome in outcomes]
        if self.outcomes != expected:
            raise AssertionError(f"expected the attempts {expected}, got {self.outcomes}: {self.describe()}")

    def assert_error(self, error_type: str, message_contains: str | None = None) -> None:
        """Its last error (the job's: why it waits or ended) is of `error_type`, its message containing
        `message_contains` if given."""
        if (self.error is None or self.error.error_type != error_type
                or (message_contains is not None and message_contains not in self.error.message)):
            wanted = error_type + (f" containing {message_contains!r}" if message_contains is not None else "")
            raise AssertionError(f"expected the last error {wanted}: {self.describe()}")


def _error(error: ErrorSummary) -> str:
    return f"{error.error_type}: {error.message}"
