"""The items a write plan (onward.store.ports.write_plans) becomes in the shapes of onward.store.dynamo.keys: the
job row's change as attributes set and removed, a run record's close (with the job's result when it completes
it), a transition's and a create's puts (pure)."""

from __future__ import annotations

from typing import Any, NamedTuple

from onward.domain.clock import EpochMs
from onward.domain.errors import StoreInvariantViolation
from onward.domain.states import JobState
from onward.store.dynamo.keys import (
    RUN_CLAIMED_AT,
    RUN_LEASE_EXPIRES_AT,
    idempotency_item,
    item_bytes,
    job_item,
    open_attempt_fields,
    outbox_item,
    run_item,
    run_result_fields,
    ttl_after,
)
from onward.store.ports.rows import OpenAttempt
from onward.store.ports.write_plans import NewJobWrite, TransitionWrite


class JobRowUpdate(NamedTuple):
    """The job row's change: `set` these attributes, `remove` those, on the condition that the row still
    holds `expected` (state, version, attempt) and, with `lapsed_by`, a lease that expired by then.
    Attributes the change does not touch keep what the row holds (a heartbeat's renewed lease)."""

    job_id: str
    set: dict[str, Any]
    remove: tuple[str, ...]
    expected: tuple[JobState, int, int]
    lapsed_by: EpochMs | None


class RunClose(NamedTuple):
    job_id: str
    attempt: int
    # outcome, finished_at, error, expires_at; result, result_size_bytes (a completion's); when `whole`, every
    # other field of the Run too (worker_id, claimed_at, lease_expires_at... from the job row)
    fields: dict[str, Any]
    whole: bool  # False: the record exists, opened by a release whose claim put it (only its closure is set)


def job_row_update(write: TransitionWrite) -> JobRowUpdate:
    """The job row's items before and after, diffed: the diff sets `expires_at` when the job ends and removes
    it when a replay revives it."""
    before_job = write.change.before
    assert before_job is not None
    before = job_item(before_job, write.ready_shards, write.job_retention_s, write.running_shard)
    after = job_item(write.change.after, write.ready_shards, write.job_retention_s, write.charged_shard)
    sets = {name: value for name, value in after.items() if before.get(name) != value}
    removes = tuple(name for name in before if name not in after)
    if write.change.open_run is not None:  # the attempt's claim, on the row while it runs (no run record: issue 34)
        run = write.change.open_run
        sets |= open_attempt_fields(OpenAttempt(run.claimed_at, run.lease_expires_at))
    elif write.change.close_run is not None:
        removes += (RUN_CLAIMED_AT, RUN_LEASE_EXPIRES_AT)
    return JobRowUpdate(
        job_id=write.job_id,
        set=sets,
        remove=removes,
        expected=write.expected,
        lapsed_by=write.lapsed_by,
    )


def run_close(write: TransitionWrite) -> RunClose | None:
    """The run record the transition closes, written whole (the claim wrote none: issue 34): the attempt as the
    job row holds it (`write.opened`, its worker the row's lease owner), its outcome, when, its error, its TTL
    from then and, when the transition completes the job, the result (one item fewer than a result item of its
    own). The attempt that completes a job ends it, so the run record's TTL is the job row's (job_expires_at).
    A row claimed by a release whose claim put the record (no `opened`) has only the closure set on it."""
    closure = write.change.close_run
    if closure is None:
        if write.change.has_result:
            raise StoreInvariantViolation(f"a result for job {write.job_id} with no run record to hold it")
        return None
    fields: dict[str, Any] = {"outcome": closure.outcome.value, "finished_at": closure.finished_at}
    if closure.error is not None:
        fields["error"] = closure.error.model_dump(mode="json")
    fields["expires_at"] = ttl_after(closure.finished_at, write.job_retention_s)
    if write.change.has_result:
        fields |= run_result_fields(write.change)
    opened = write.closed_whole()
    if opened is None:
        return RunClose(write.job_id, closure.attempt, fields, whole=False)
    held = {name: value for name, value in run_item(opened).items() if name not in ("pk", "sk")}
    return RunClose(write.job_id, closure.attempt, held | fields, whole=True)


def transition_event(write: TransitionWrite) -> dict[str, Any]:
    """The transition's outbox event."""
    return outbox_item(write.change, write.retention_s)


class NewJobItems(NamedTuple):
    """A create's puts: the job row, its first event and, with an Idempotency-Key, the key's item."""

    job: dict[str, Any]
    outbox: dict[str, Any]
    idempotency: dict[str, Any] | None

    @property
    def puts(self) -> list[dict[str, Any]]:
        """The items it puts: its actions besides the queue entry's."""
        return [self.job, self.outbox, *([self.idempotency] if self.idempotency is not None else [])]

    @property
    def item_bytes(self) -> int:
        """What its puts count towards a transaction's 4 MB (an upper bound)."""
        return sum(item_bytes(item) for item in self.puts)


def new_job_items(write: NewJobWrite) -> NewJobItems:
    job = write.change.after
    key_item = None
    if write.idempotency is not None:
        key, digest = write.idempotency
        key_item = idempotency_item(job, key, digest, write.job_retention_s)
    return NewJobItems(job_item(job, write.ready_shards, write.job_retention_s),
                       outbox_item(write.change, write.retention_s), key_item)
