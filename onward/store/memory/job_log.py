"""The job log in memory (onward.store.ports.job_log): job rows, runs (the completing one with the job's
result), events and Idempotency-Keys as domain values, each write checked whole before any of it is applied, as
one DynamoDB transaction is."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from onward.domain.clock import EpochMs
from onward.domain.documents import json_size
from onward.domain.errors import StoreInvariantViolation
from onward.domain.models import Job, OutboxEvent, Run
from onward.domain.states import JobState, RunOutcome
from onward.store.memory.concurrency_keys import apply_slot, slot_failures
from onward.store.memory.rate_buckets import apply_moves, moves_hold
from onward.store.memory.state import MemoryState, StoredRun, copied, detached_job, stored
from onward.store.memory.unique_keys import put_unique, unique_held
from onward.store.ports.job_log import JobLog
from onward.store.ports.outcomes import CommitOutcome, CreateOutcome, ManyCreated, Role, judge
from onward.store.ports.rows import IdempotencyRecord, JobRow, OpenAttempt
from onward.store.ports.transaction_limits import check_one_transaction
from onward.store.ports.write_plans import (
    NewJobWrite,
    OverlapMark,
    TransitionWrite,
    epoch_refusal,
    queue_entry_updates,
)


def _detached_run(run: Run) -> Run:
    return run.model_copy(update={"overlapped_with": list(run.overlapped_with)})


OPENED_FIELDS = ("job_id", "attempt", "worker_id", "claimed_at", "lease_expires_at")  # what a close takes from the row


def _event(job: Job, result: Any, size: int | None) -> OutboxEvent:
    """The outbox event of a committed version: its result as it is kept, the size of the result reported."""
    return OutboxEvent.of(job, result=result, result_size=size)


class MemoryJobLog(JobLog):
    """The job log over a MemoryState (`_state`), its lock held for each read and write."""

    _state: MemoryState

    # --- reads ------------------------------------------------------------------------------------------

    def job(self, job_id: str) -> JobRow | None:
        with self._state.lock:
            return self._state.row(job_id)

    def tenant_job(self, job_id: str, tenant_id: str) -> JobRow | None:
        with self._state.lock:
            row = self._state.row(job_id)
        return row if row is not None and row.job.tenant_id == tenant_id else None

    def run(self, job_id: str, attempt: int) -> Run | None:
        return next((run for run in self._runs(job_id) if run.attempt == attempt), None)

    def runs(self, job_id: str) -> list[Run]:
        return self._runs(job_id)

    def _runs(self, job_id: str) -> list[Run]:
        """The kept records, and the attempt the row says runs built from the row when none is kept (issue 34:
        the claim keeps no record), as on DynamoDB (onward.store.dynamo.run_reads)."""
        with self._state.lock:
            runs = {attempt: _detached_run(kept.run) for attempt, kept in self._state.runs.get(job_id, {}).items()}
            row = self._state.rows.get(job_id)
            running = None if row is None else row.open_run()
            if running is not None and running.attempt not in runs:
                runs[running.attempt] = running
            return [runs[attempt] for attempt in sorted(runs)]

    def result(self, job_id: str) -> Any:
        """On the run record that completed the job (its last), as on DynamoDB (onward.store.dynamo.results):
        a result kept the way before issue 34 only when that run carries none."""
        with self._state.lock:
            runs = self._state.runs.get(job_id)
            last = None if not runs else runs[max(runs)]
            if last is None or last.run.outcome is not RunOutcome.SUCCEEDED:
                return None
            return copied(last.result if last.has_result else self._old_result(job_id))

    def _old_result(self, job_id: str) -> Any:
        """The job's result kept the way before issue 34 (the lock held)."""
        return self._state.old_results.get(job_id)

    def events(self, job_id: str) -> list[OutboxEvent]:
        with self._state.lock:
            versions = self._state.events.get(job_id, {})
            return [versions[version].model_copy(update={"result_inline": copied(versions[version].result_inline)})
                    for version in sorted(versions)]

    def all_jobs(self) -> Iterator[Job]:
        with self._state.lock:
            jobs = [detached_job(self._state.rows[job_id].job) for job_id in sorted(self._state.rows)]
        yield from jobs

    def idempotency(self, tenant_id: str, key: str) -> IdempotencyRecord | None:
        with self._state.lock:
            return self._state.keys.get((tenant_id, key))

    # --- creates ----------------------------------------------------------------------------------------

    def _key_used(self, write: NewJobWrite) -> bool:
        return write.idempotency is not None and (write.job.tenant_id, write.idempotency[0]) in self._state.keys

    def _exists(self, write: NewJobWrite) -> bool:
        """Whether the create's job row or its first event is kept already (no store decides such a create)."""
        job = write.job
        return job.job_id in self._state.rows or job.version in self._state.events.get(job.job_id, {})

    def _put_new(self, write: NewJobWrite) -> None:
        job = write.job.model_copy(update={"params": stored(write.job.params)})
        self._state.put_row(JobRow(job, write.ready_shards, region_epoch=write.region_epoch))
        self._state.events.setdefault(job.job_id, {})[job.version] = _event(job, None, None)
        if write.idempotency is not None:
            key, digest = write.idempotency
            self._state.keys[(job.tenant_id, key)] = IdempotencyRecord(job.job_id, digest)
        put_unique(self._state, write)  # unique jobs (issue 37)

    def create(self, write: NewJobWrite) -> CreateOutcome:
        with self._state.lock:
            if self._key_used(write):
                return CreateOutcome.KEY_USED
            if unique_held(self._state, write):
                return CreateOutcome.UNIQUE_HELD
            if self._exists(write):
                raise StoreInvariantViolation(f"the create of job {write.job.job_id} was refused: "
                                              "its job id or first event exists")
            self._put_new(write)
            for entry in queue_entry_updates([write.waiting] if write.waiting is not None else []):
                self._state.apply_entry(entry)
        return CreateOutcome.CREATED

    def create_many(self, writes: Sequence[NewJobWrite]) -> ManyCreated:
        # The jobs' own JSON is a lower bound of their items' bytes: what DynamoDB surely refuses is refused here.
        check_one_transaction(writes, item_bytes=sum(json_size(write.job.model_dump(mode="json"))
                                                     for write in writes))
        with self._state.lock:
            if any(self._exists(write) for write in writes):
                raise StoreInvariantViolation(f"a create of {len(writes)} jobs was refused: a job id or a first "
                                              "event exists")
            keys_used = frozenset(position for position, write in enumerate(writes) if self._key_used(write))
            if keys_used:
                return ManyCreated(CreateOutcome.KEY_USED, keys_used)
            held = frozenset(position for position, write in enumerate(writes) if unique_held(self._state, write))
            if held:
                return ManyCreated(CreateOutcome.UNIQUE_HELD, unique_held=held)
            for write in writes:
                self._put_new(write)
            for entry in queue_entry_updates(write.waiting for write in writes if write.waiting is not None):
                self._state.apply_entry(entry)
        return ManyCreated(CreateOutcome.CREATED)

    # --- transitions ------------------------------------------------------------------------------------

    def commit(self, write: TransitionWrite) -> CommitOutcome:
        with self._state.lock:
            failed = self._failed_conditions(write)
            if failed:
                change = write.change
                return judge(failed, conflict=False, claim=write.claims_slot, refused=(
                    f"{change.transition.value} of job {change.after.job_id} v{change.after.version} "
                    f"refused: {sorted(role.value for role in failed)}"))
            self._apply(write)
        return CommitOutcome.COMMITTED

    def _failed_conditions(self, write: TransitionWrite) -> set[Role]:
        """Every condition of the write, checked before anything is written (as DynamoDB checks all)."""
        state = self._state
        change = write.change
        if change.has_result and change.close_run is None:  # (as onward.store.dynamo.plan_items.run_close)
            raise StoreInvariantViolation(f"a result for job {write.job_id} with no run record to hold it")
        failed: set[Role] = set()
        row = state.rows.get(write.job_id)
        refusal = None if row is None else epoch_refusal(row.region_epoch, write)
        if refusal is not None:
            failed.add(refusal)  # (region fence, issue 39)
        if row is None or (row.job.state, row.job.version, row.job.attempt) != write.expected or row.held_by:
            failed.add(Role.JOB)  # (a held row: put back first, onward.store.held_jobs)
        elif write.lapsed_by is not None and not (row.job.lease_expires_at is not None
                                                  and row.job.lease_expires_at <= write.lapsed_by):
            failed.add(Role.JOB)  # a heartbeat renewed the lease after the reaper read the row
        elif write.rate is not None and row.job.rate_reserved_at != write.rate.reserved_read:
            failed.add(Role.JOB)  # rate limits (issue 37): reserved (or spent) since the claim read it
        if write.rate is not None and not moves_hold(state, write.rate.tenant_id, write.rate.moves):
            failed.add(Role.RATE)
        failed |= slot_failures(state, write.concurrency)  # concurrency keys (issue 37)
        runs = state.runs.get(write.job_id, {})
        if change.close_run is not None:  # (as onward.store.dynamo.writes.run_close: the whole record, or a close)
            closing = runs.get(change.close_run.attempt)
            whole = write.closed_whole() is not None
            if (closing is None and not whole) or (closing is not None and closing.run.outcome is not None):
                failed.add(Role.RUN_CLOSED)
        if write.running is not None and state.lift_refused(write.running):
            failed.add(Role.LIFT)  # (DynamoDB tells it from a cap's refusal by the item it returns)
        elif write.running is not None and not state.admitted(write.running):
            failed.add(Role.RUNNING)
        if change.after.version in state.events.get(write.job_id, {}):
            failed.add(Role.OUTBOX)
        if not all(state.at_cap(tenant_id, shard, cap) for tenant_id, shard, cap in write.still_at_cap):
            failed.add(Role.STILL_AT_CAP)
        return failed

    def _apply(self, write: TransitionWrite) -> None:
        state = self._state
        change = write.change
        before, after = change.before, change.after
        assert before is not None
        row = state.rows[write.job_id]
        # Only what the change changes: a lease renewed since the row was read is kept (as DynamoDB's update
        # of the attributes that differ keeps it).
        changed = {name: getattr(after, name) for name in type(after).model_fields
                   if getattr(before, name) != getattr(after, name)}
        running_shard = write.charged_shard if after.state is JobState.RUNNING else 0
        opened = row.opened if after.state is JobState.RUNNING else None
        if change.open_run is not None:  # the attempt's claim, on the row (no run record: issue 34)
            opened = OpenAttempt(change.open_run.claimed_at, change.open_run.lease_expires_at)
        state.put_row(JobRow(row.job.model_copy(update=changed), write.ready_shards, running_shard,
                             region_epoch=write.region_epoch, opened=opened))
        runs = state.runs.setdefault(write.job_id, {})
        closure = change.close_run
        if closure is not None:
            whole = write.closed_whole()
            closing = runs.setdefault(closure.attempt, StoredRun(whole)) if whole is not None else runs[closure.attempt]
            held = {} if whole is None else {name: getattr(whole, name) for name in OPENED_FIELDS}
            closing.run = closing.run.model_copy(update={
                **held, "outcome": closure.outcome, "finished_at": closure.finished_at, "error": closure.error})
        result = stored(change.result) if change.has_result else None
        if change.has_result and closure is not None:  # on the run it closes (_failed_conditions checked one)
            runs[closure.attempt].result, runs[closure.attempt].has_result = result, True
        if write.running is not None:
            state.apply_running(write.running)
        if write.rate is not None:
            apply_moves(state, write.rate.tenant_id, write.rate.moves)
        released = apply_slot(state, write.concurrency)  # concurrency keys (issue 37): a held job put back
        for entry in queue_entry_updates([*([write.waiting] if write.waiting is not None else []), *released]):
            state.apply_entry(entry)
        size = json_size(change.result) if change.has_result else None
        state.events.setdefault(write.job_id, {})[after.version] = _event(after, result, size)

    # --- a run's marks ----------------------------------------------------------------------------------

    def _mark(self, job_id: str, attempt: int, overlap: OverlapMark | None, **fields: Any) -> None:
        """Set `fields` on a kept run, and `overlap`'s mark with them: the attempts added to the set, the
        `overlaps` index key kept from the first mark."""
        kept = self._state.runs[job_id][attempt]
        if overlap is not None:
            fields["overlapped_with"] = sorted({*kept.run.overlapped_with, *overlap.attempts})
            if kept.overlap_at is None:
                kept.overlap_at = overlap.began_at
        kept.run = kept.run.model_copy(update=fields)

    def _worker_run(self, job_id: str, attempt: int, worker_id: str) -> Run | None:
        kept = self._state.runs.get(job_id, {}).get(attempt)
        return None if kept is None or kept.run.worker_id != worker_id else kept.run

    def mark_fenced(self, job_id: str, attempt: int, worker_id: str, late_report: RunOutcome,
                    at: EpochMs, *, expires_at: int, overlap: OverlapMark | None = None) -> bool:
        # `expires_at` is a TTL: nothing expires in memory
        with self._state.lock:
            run = self._worker_run(job_id, attempt, worker_id)
            if run is None or run.outcome not in (None, RunOutcome.LEASE_EXPIRED):
                return False
            self._mark(job_id, attempt, overlap, reclaimed_as=run.outcome, outcome=RunOutcome.FENCED,
                       late_report=late_report, late_report_at=at)
            return True

    def mark_lease_lost(self, job_id: str, attempt: int, worker_id: str, at: EpochMs, *,
                        overlap: OverlapMark | None = None) -> bool:
        with self._state.lock:
            run = self._worker_run(job_id, attempt, worker_id)
            if run is None or run.outcome not in (RunOutcome.LEASE_EXPIRED, RunOutcome.FENCED) or (
                    run.lease_lost_at is not None):
                return False
            self._mark(job_id, attempt, overlap, lease_lost_at=at)
            return True

    def mark_overlap(self, job_id: str, attempt: int, overlap: OverlapMark) -> bool:
        """On a kept run, or on the running attempt's (kept from now, as DynamoDB's update creates a partial
        record that the attempt's close merges: issue 34)."""
        with self._state.lock:
            if attempt not in self._state.runs.get(job_id, {}) and not kept_running(self._state, job_id, attempt):
                return False
            self._mark(job_id, attempt, overlap)
            return True


def kept_running(state: MemoryState, job_id: str, attempt: int) -> bool:
    """Keep the run of `attempt` from its row if the row says it runs (a write to its partial record: progress,
    an overlap mark); whether it did. The state's lock held."""
    row = state.rows.get(job_id)
    running = None if row is None else row.open_run()
    if running is None or running.attempt != attempt:
        return False
    state.runs.setdefault(job_id, {})[attempt] = StoredRun(running)
    return True
