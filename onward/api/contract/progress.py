"""How the API shows a running attempt's progress (issue 38): on a job's status while it runs, and on the
attempt's run record (docs/progress.md)."""

from __future__ import annotations

from pydantic import Field

from onward.api.contract.common import Answer
from onward.domain.clock import iso
from onward.domain.progress import RunProgress, ShownProgress


class JobProgress(Answer):
    """The running attempt's latest progress update the status view shows (rate-limited: at most one every
    2 s). Only on a running job's status, and only for the version it was reported at: the next transition
    clears it, so a final status never shows one."""

    fraction: float = Field(ge=0, le=1, description="how far the attempt got, from 0 to 1, as its handler said")
    message: str | None = Field(None, description="what the handler said it is doing (at most 200 characters)")
    attempt: int = Field(description="the attempt that reported it")
    at: str = Field(description="when the worker reported it", json_schema_extra={"format": "date-time"})

    @classmethod
    def of(cls, shown: ShownProgress | None) -> JobProgress | None:
        if shown is None:
            return None
        return cls(fraction=shown.fraction, message=shown.message, attempt=shown.attempt, at=shown.at)


class RunProgressRecord(Answer):
    """The latest progress update written on an attempt's run record."""

    fraction: float = Field(ge=0, le=1)
    message: str | None = None
    at: str = Field(json_schema_extra={"format": "date-time"})

    @classmethod
    def of(cls, progress: RunProgress | None) -> RunProgressRecord | None:
        if progress is None:
            return None
        return cls(fraction=progress.fraction, message=progress.message, at=iso(progress.at))
