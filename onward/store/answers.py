"""What JobStore answers its callers: a create's Created, a worker's Report and a cancel's CancelOutcome,
with their statuses."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from onward.domain.models import Job


class ReportStatus(StrEnum):
    APPLIED = "applied"
    FENCED = "fenced"  # the attempt no longer holds the job: nothing changed, stop


@dataclass(frozen=True)
class Created:
    job: Job
    created: bool  # False: an earlier request with the same Idempotency-Key made it
    # unique jobs (issue 37): True when `job` is the holder of the create's unique key (nothing was created);
    # `replaced`: the job `replace` cancelled to take the key over
    duplicate_of_unique: bool = False
    replaced: str | None = None


@dataclass(frozen=True)
class Report:
    """The answer to a worker's complete / fail / cancel acknowledgement / release."""

    status: ReportStatus
    job: Job

    @property
    def applied(self) -> bool:
        return self.status is ReportStatus.APPLIED


class CancelStatus(StrEnum):
    CANCELLED = "cancelled"
    REQUESTED = "cancel_requested"  # running: the worker will stop at its next heartbeat
    ALREADY_REQUESTED = "already_requested"
    ALREADY_ENDED = "already_ended"


@dataclass(frozen=True)
class CancelOutcome:
    status: CancelStatus
    job: Job
