"""A running attempt's progress as pure values: what a handler reports (a fraction and a message), the event
that carries it to the status view, and the rule that orders it against the job's transitions.

A progress event never raises the job's state version. It carries the version the job was at when it was
written (fenced: written only while the job runs under that attempt) and a sequence number that rises with
each update of the attempt. The view applies it only while it shows that same version, running, of that
attempt, with an older sequence number (`judge_progress`); so a progress event delivered after the job moved
on (a completion, a cancel request, the next attempt) is a no-op, never a conflict, and a redelivered or older
one is dropped. docs/progress.md says why this is safe across shards and redeliveries.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from onward.domain.clock import EpochMs, iso
from onward.domain.states import JobState

PROGRESS_KIND: Final = "progress"
PROGRESS_SCHEMA: Final = 1
MAX_PROGRESS_MESSAGE = 200  # characters; a longer message is cut (a status line, not a log)
# Sequence numbers of one attempt stay below this: the outbox keys an update `version + seq / SEQ_SPACE`
# (onward.store.dynamo.progress_items), between the version it was written at and the next one.
SEQ_SPACE: Final = 10**9


def checked_progress(fraction: float, message: str | None) -> tuple[float, str | None]:
    """A handler's report, checked: `fraction` a finite number from 0 to 1 (ValueError otherwise: a bug in the
    handler, said at once), `message` cut to MAX_PROGRESS_MESSAGE characters and made valid Unicode."""
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise ValueError(f"progress fraction must be a number from 0 to 1, not {type(fraction).__name__}")
    if not math.isfinite(fraction) or not 0 <= fraction <= 1:
        raise ValueError(f"progress fraction must be from 0 to 1, not {fraction!r}")
    if message is None:
        return float(fraction), None
    text = str(message)[:MAX_PROGRESS_MESSAGE].encode("utf-8", "backslashreplace").decode("utf-8")
    return float(fraction), text


class ShownProgress(BaseModel):
    """A running attempt's latest progress as the status view holds it and GET /jobs/{id} shows it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    fraction: float = Field(ge=0, le=1)
    message: str | None = None
    attempt: int = Field(ge=1)
    at: str  # when the worker reported it (ISO-8601 UTC)


class RunProgress(BaseModel):
    """The latest progress update written on an attempt's run record."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fraction: float = Field(ge=0, le=1)
    message: str | None = None
    at: EpochMs
    seq: int = Field(ge=1)


class ProgressEvent(BaseModel):
    """One progress update of a running attempt, as the outbox, the events stream and the projector carry it
    (`{"kind": "progress", ...}`: consumers that do not show progress skip it, as they skip heartbeats)."""

    # a field a newer writer adds is ignored: progress is shown, never kept, so nothing is lost
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    kind: Literal["progress"] = PROGRESS_KIND
    schema_version: int = Field(default=PROGRESS_SCHEMA, alias="schema")
    job_id: str
    tenant_id: str
    version: int = Field(ge=1)  # the job's version when it was written: it applies to that version only
    attempt: int = Field(ge=1)
    seq: int = Field(ge=1, lt=SEQ_SPACE)  # rises with each update of the attempt
    fraction: float = Field(ge=0, le=1)
    message: str | None = None
    at: str  # when the worker reported it (ISO-8601 UTC)
    committed_at: str | None = None  # set by the relay, as on job events

    @property
    def event_id(self) -> str:
        return f"{self.job_id}:{self.version}:p{self.seq}"

    def shown(self) -> ShownProgress:
        """What the view shows of it (its `progress` attribute)."""
        return ShownProgress(fraction=self.fraction, message=self.message, attempt=self.attempt, at=self.at)


def progress_event(job_id: str, tenant_id: str, version: int, attempt: int, seq: int, fraction: float,
                   message: str | None, at: EpochMs) -> ProgressEvent:
    return ProgressEvent(job_id=job_id, tenant_id=tenant_id, version=version, attempt=attempt, seq=seq,
                         fraction=fraction, message=message, at=iso(at))


class ProgressOutcome(StrEnum):
    APPLIED = "applied"  # the view shows it
    DUPLICATE = "duplicate"  # the view shows this very update already (a redelivery)
    SUPERSEDED = "superseded"  # the view shows a newer update of the attempt, or the job moved on: no-op


def judge_progress(view: dict[str, Any] | None, event: ProgressEvent) -> ProgressOutcome:
    """What the status view does with `event`, given the row it holds (None: no row yet). Applied only to the
    row of the same version, running, of the same attempt, whose progress is older."""
    if view is None or int(view.get("version", 0)) != event.version:
        return ProgressOutcome.SUPERSEDED
    if view.get("status") != JobState.RUNNING.value or int(view.get("attempt", 0)) != event.attempt:
        return ProgressOutcome.SUPERSEDED
    held_seq = view.get("progress_seq")
    if held_seq is None or int(held_seq) < event.seq:
        return ProgressOutcome.APPLIED
    return ProgressOutcome.DUPLICATE if int(held_seq) == event.seq else ProgressOutcome.SUPERSEDED


def latest_progress(events: list[ProgressEvent], after_version: int | None) -> ProgressEvent | None:
    """Of one job's progress events in a batch, the one worth writing once the batch's transitions are written
    (`after_version`: the highest version among them, None when there are none): the newest update of the
    newest version, unless a transition of the batch already moved past it."""
    candidates = [event for event in events if after_version is None or event.version >= after_version]
    if not candidates:
        return None
    return max(candidates, key=lambda event: (event.version, event.seq))
