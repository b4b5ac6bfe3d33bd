"""The status projector: Kinesis events -> the status view, guarded by version.

Each event costs ONE conditional write: written when the view holds no version or an older one;
otherwise DynamoDB refuses and returns the view's item (ReturnValuesOnConditionCheckFailure=ALL_OLD), which
is enough to classify the refusal with no extra read: duplicate, stale, or conflict. A conflict (same
version, different content) is kept as its own item with both payloads and never overwrites the view.

The write is a PutItem, not an UpdateItem: a view item is derived from its event alone, so the whole item
is replaced; it costs the same write units and DynamoDB evaluates no update expression. That also keeps the
TTL right: every row carries `expires_at` (onward.domain.projection.view_expires_at): a terminal status's
after its retention for the job's tenant, type and outcome (onward.domain.retention), a live job's after a
horizon each newer event moves. Kept conflicts and parked records expire after the job retention, counted
from when they were written.

A job whose events are older than the shortest retention may be gone (an outbox replay delivers them): those
jobs' rows are looked up first, in one read per batch, and a gone job gets no view row (gone.py).

A batch is written job by job at once (StatusProjector.project_batch): its events are grouped by job, the
groups run on a small thread pool shared by the process, and a job's events of one batch are coalesced
(coalesce.py): judged in batch order as one by one would judge them, and only the last one applied is written,
one PutItem for the job (two when the view held more than assumed: the refusal says what it holds). The
writes this saves are counted (BatchTally.writes_saved).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from aws_lambda_powertools import Logger
from botocore.exceptions import ClientError

from onward.domain.clock import Clock, EpochMs, epoch_ms, iso, system_clock
from onward.domain.models import OutboxEvent
from onward.domain.progress import ProgressEvent
from onward.domain.projection import ProjectionOutcome, classify, live_view_horizon_s, view_fields, view_item
from onward.domain.retention import RetentionPolicy
from onward.faults import fault_point
from onward.pipeline.checkpoints import PROJECTOR_CONSUMER, CheckpointStore
from onward.pipeline.heartbeats import Heartbeat, SlotId, merge_through
from onward.pipeline.listing import LISTING_ATTRIBUTE, listing_key
from onward.pipeline.parking import ParkedRecords
from onward.pipeline.poison import PARK_AFTER_FAILURES, FailureCounts
from onward.pipeline.projector.coalesce import Coalesced, Held, coalesce
from onward.pipeline.projector.gone import gone_jobs, maybe_gone
from onward.pipeline.projector.progress import ProgressTally, ProgressWriter
from onward.pipeline.projector.records import UnreadableRecord, parse_record
from onward.pipeline.tag_index import put_tag_entries
from onward.settings import DAY_S, DEFAULT_JOB_RETENTION_DAYS, DEFAULT_OUTBOX_RETENTION_DAYS
from onward.store.dynamo.attributes import from_item, to_item
from onward.store.dynamo.keys import ttl_after

logger = Logger(service="onward-projector")

WRITER_THREADS = 8  # a batch's jobs written at once: well under the client's connection pool (64)
# One pool for the process, built on import and kept (as a warm Lambda keeps it): every batch, of every shard the
# process reads, hands its jobs to it; a batch waits for its own jobs only.
_writers = ThreadPoolExecutor(max_workers=WRITER_THREADS, thread_name_prefix="onward-projector")


class ShardRecord(NamedTuple):
    """One record of a shard's batch, as the event source delivers it."""

    sequence_number: str
    data: bytes
    stream_record: str | None = None  # the rest of the record as delivered (JSON): kept if it is parked


@dataclass(frozen=True)
class BatchFailure:
    """The earliest record of a batch (by its index in the batch) that failed, and why: it and every record
    after it are to be delivered again; every record before it was projected."""

    index: int
    error: Exception


@dataclass
class BatchTally:
    """What one batch did; the handler turns it into metrics. `count` may be called from several threads."""

    outcomes: dict[ProjectionOutcome, int] = field(default_factory=dict)
    parked: int = 0
    heartbeats: int = 0
    slots: int = 0  # K of the newest heartbeat seen
    through: dict[SlotId, EpochMs] = field(default_factory=dict)  # heartbeat slots: newest commit time each
    parents: tuple[str, ...] = ()  # the shard's parents, as its heartbeats name them
    lag_ms: list[int] = field(default_factory=list)
    writes_saved: int = 0  # view writes coalescing saved: one per event beyond the job's writes
    gone: int = 0  # events of jobs that no longer exist (past their retention): no view row written
    progress: ProgressTally = field(default_factory=ProgressTally)  # progress events' outcomes (issue 38)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def count(self, outcome: ProjectionOutcome, lag_ms: int | None = None) -> None:
        """One event's outcome, and its lag (commit to projected) when it was applied."""
        with self._lock:
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
            if lag_ms is not None:
                self.lag_ms.append(lag_ms)

    def save(self, writes: int) -> None:
        with self._lock:
            self.writes_saved += writes

    def hear(self, beat: Heartbeat) -> None:
        """A heartbeat projected: its slots are projected up to their times; the view is untouched."""
        with self._lock:
            self.heartbeats += 1
            merge_through(self.through, beat.through)
            self.slots = max(self.slots, beat.slots)
            self.parents = beat.parents or self.parents


class _BatchRun:
    """What one batch's job groups share while they run: the earliest failure so far, and whether a crash
    (an exception from a fault point) stopped them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failure: BatchFailure | None = None
        self._crashed = False

    @property
    def failure(self) -> BatchFailure | None:
        with self._lock:
            return self._failure

    def proceeds(self, index: int) -> bool:
        """Whether the record at `index` is still to be written: nothing crashed, and no record before it
        failed (one after the earliest failure is delivered again anyway)."""
        with self._lock:
            return not self._crashed and (self._failure is None or index < self._failure.index)

    def fail(self, index: int, error: Exception) -> None:
        with self._lock:
            if self._failure is None or index < self._failure.index:
                self._failure = BatchFailure(index, error)

    def crash(self) -> None:
        with self._lock:
            self._crashed = True


class OutcomeTotals:
    """Every outcome this process's batches projected, a crashed batch's included (what its metrics would
    have said had it lived): read by local drills and the soak audit; on Lambda the metrics are the record."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    def add(self, tally: BatchTally) -> None:
        with self._lock:
            self._counts.update({outcome.value: count for outcome, count in tally.outcomes.items()})
            self._counts["parked"] += tally.parked
            self._counts["gone"] += tally.gone

    def snapshot(self) -> dict[str, int]:
        """Counts by outcome (applied, duplicate, stale, conflict), parked and gone, zero when none."""
        with self._lock:
            return {name: self._counts.get(name, 0)
                    for name in [*(o.value for o in ProjectionOutcome), "parked", "gone"]}


class StatusProjector:
    def __init__(
        self,
        client: Any,
        status_table: str,
        conflicts_table: str,
        checkpoints: CheckpointStore,
        parked: ParkedRecords,
        clock: Clock = system_clock,
        retention_s: int = DEFAULT_JOB_RETENTION_DAYS * DAY_S,
        failure_counts: FailureCounts | None = None,
        policy: RetentionPolicy | None = None,
        outbox_retention_s: int = DEFAULT_OUTBOX_RETENTION_DAYS * DAY_S,
        jobs_table: str | None = None,
    ) -> None:
        """`retention_s`: the job retention (Settings.job_retention_s), the TTL of kept conflicts, and of
        terminal view rows without a `policy` (Settings.retention_policy). `outbox_retention_s`: with the
        policy's longest retention, the horizon of a live job's view row. `jobs_table`: where to look up
        whether a job with old events still exists (gone.py); without it, every event is projected.
        `failure_counts`: each record's failed deliveries, to park a poison record (poison.py); without it a
        record that keeps failing is left to the event source mapping."""
        self._db = client
        self._status = status_table
        self._conflicts = conflicts_table
        self._checkpoints = checkpoints
        self._parked = parked
        self._clock = clock
        self._retention_s = retention_s
        self._failure_counts = failure_counts
        self._policy = policy or RetentionPolicy.uniform(retention_s)
        self._live_horizon_s = live_view_horizon_s(self._policy, outbox_retention_s)
        self._jobs_table = jobs_table
        self._progress = ProgressWriter(client, status_table)

    def project(self, event: OutboxEvent) -> ProjectionOutcome:
        """Write the view if `event` is newer than what it holds; one request on every common path."""
        held = self._put_view(event, below=event.version)
        if held is None:
            return ProjectionOutcome.APPLIED
        outcome = classify(held.get("version"), held.get("digest"), event)
        if outcome is ProjectionOutcome.CONFLICT:
            self._keep_conflict(event, held)
        return outcome

    def project_coalesced(self, events: Sequence[OutboxEvent]) -> tuple[Coalesced, int]:
        """One job's events of a batch, in batch order, coalesced (coalesce.py): the plan that was carried out
        (every outcome, the conflicts kept) and the view writes it took. First the plan for a view below the
        first event, written at once; on a refusal, the plan from what the view holds, until one is written
        or nothing applies (each refusal shows a higher version, so this ends)."""
        plan = coalesce(events, None)
        writes = 0
        while plan.write is not None:
            held = self._put_view(plan.write, below=plan.below)
            writes += 1
            if held is None:
                break
            plan = coalesce(events, Held.of(held))
        for kept in plan.conflicts:
            self._keep_conflict(kept.event, kept.held)
        return plan, writes

    def _put_view(self, event: OutboxEvent, below: int) -> dict[str, Any] | None:
        """PutItem `event`'s view row if the view holds no version of the job or one below `below`: None when
        written, else the item the view holds (the refusal returns it: no read)."""
        # The row carries its place in the tenant's sharded listing (onward.pipeline.listing).
        row = view_item(event, iso(self._clock()), self._policy, self._live_horizon_s)
        # Its tag entries first, each guarded by its own version: a failure after them is delivered again and
        # finds the row still below (onward.pipeline.tag_index).
        put_tag_entries(self._db, self._status, row)
        item = to_item({**row, LISTING_ATTRIBUTE: listing_key(event.tenant_id, event.job_id)})
        try:
            self._db.put_item(
                TableName=self._status,
                Item=item,
                ConditionExpression="attribute_not_exists(job_id) OR #version < :version",
                ExpressionAttributeNames={"#version": "version"},
                ExpressionAttributeValues={":version": {"N": str(below)}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return None
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return from_item(error.response.get("Item", {}))

    def _keep_conflict(self, event: OutboxEvent, held: dict[str, Any]) -> None:
        incoming = view_fields(event)
        now = self._clock()
        self._db.put_item(
            TableName=self._conflicts,
            Item={
                "job_id": {"S": event.job_id},
                "conflict_id": {"S": f"{event.version:012d}#{incoming['digest']}"},
                "version": {"N": str(event.version)},
                # The row's content: not its place in the listing index, which follows from the job's id.
                "view_payload": {"S": json.dumps({name: value for name, value in held.items()
                                                  if name != LISTING_ATTRIBUTE}, sort_keys=True, default=str)},
                "incoming_payload": {"S": event.model_dump_json(by_alias=True)},
                "detected_at": {"S": iso(now)},
                "expires_at": {"N": str(ttl_after(now, self._retention_s))},
            },
        )
        logger.error("same-version conflict kept apart; the view is unchanged",
                     extra={"job_id": event.job_id, "version": event.version, "view_digest": held.get("digest"),
                            "incoming_digest": incoming["digest"]})

    def project_batch(self, shard_id: str, records: Sequence[ShardRecord], tally: BatchTally) -> BatchFailure | None:
        """Project one shard's batch (`project_records`); the earliest failure, None when every record was
        projected or parked. A failed record is counted (poison.py); on its PARK_AFTER_FAILURES-th failed
        delivery it is parked in full and the records after it are projected: one poison record holds back
        only itself (and, for PARK_AFTER_FAILURES - 1 deliveries, what follows it on its shard)."""
        failure = self.project_records(shard_id, records, tally)
        while failure is not None and self._parks_poison(shard_id, records[failure.index], failure.error, tally):
            after = failure.index + 1
            rest = self.project_records(shard_id, records[after:], tally)
            failure = None if rest is None else BatchFailure(after + rest.index, rest.error)
        return failure

    def _parks_poison(self, shard_id: str, record: ShardRecord, error: Exception, tally: BatchTally) -> bool:
        """Count the record's failed delivery; park it when it has failed PARK_AFTER_FAILURES times. False when
        it is to be delivered again (or counting or parking failed: the mapping retries it)."""
        if self._failure_counts is None:
            return False
        try:
            failures = self._failure_counts.count(PROJECTOR_CONSUMER, shard_id, record.sequence_number)
            if failures < PARK_AFTER_FAILURES:
                return False
            self._parked.park(PROJECTOR_CONSUMER, shard_id, record.sequence_number, record.data,
                              f"failed {failures} deliveries, last with {type(error).__name__}: {error}",
                              job_id=_job_of(record.data), stream_record=record.stream_record, failures=failures)
        except Exception as counting:  # noqa: BLE001 - the record stays failed; the mapping delivers it again
            logger.warning("counting or parking a failed record failed", extra={
                "shard_id": shard_id, "sequence_number": record.sequence_number, "error": type(counting).__name__})
            return False
        tally.parked += 1
        logger.error("poison record parked: it failed every delivery", extra={
            "shard_id": shard_id, "sequence_number": record.sequence_number, "failures": failures,
            "error": type(error).__name__})
        return True

    def project_records(self, shard_id: str, records: Sequence[ShardRecord],
                        tally: BatchTally) -> BatchFailure | None:
        """Project records of one shard's batch; the earliest failure, None when every record was projected.

        First, in batch order on this thread: an unreadable record is parked with its raw bytes and the reason
        (the shard moves on), a heartbeat is kept for the tally, and the job events are grouped by job. Then
        the groups run on the pool at once, each coalescing its job's events into one write (batch order
        decides, as one by one); the heartbeats before the earliest failure are tallied.

        An error (a DynamoDB error, parking included) fails its record (a job's write: the group's first) and
        ends its group; the other groups go on with the records before the earliest failure and skip those
        after it. Records after the failure that were written anyway are simply delivered again: the version
        guard absorbs them as duplicates.

        Each record passes the fault point `projector.after_record` (subject `<shard>:<sequence number>`)
        once projected: every record of a job's group passes it after the group's write. A fault point's exception
        (a drill's crash) stops every group before its next write and is raised once all have stopped.
        """
        run = _BatchRun()
        groups: dict[str, list[tuple[int, OutboxEvent]]] = {}
        progress: dict[str, list[tuple[int, ProgressEvent]]] = {}  # written after the job's transitions
        beats: list[tuple[int, Heartbeat]] = []
        for index, record in enumerate(records):
            try:
                read = self._read(shard_id, record, tally)
            except Exception as error:  # noqa: BLE001 - parking failed: this record is the earliest failure
                run.fail(index, error)
                break
            if isinstance(read, OutboxEvent):
                groups.setdefault(read.job_id, []).append((index, read))
                continue
            if isinstance(read, ProgressEvent):
                progress.setdefault(read.job_id, []).append((index, read))
                continue
            if read is not None:
                beats.append((index, read))
            self._after_records(shard_id, [record])
        self._skip_gone(shard_id, records, groups, run, tally)
        done = wait([_writers.submit(self._write_group, shard_id, records, groups.get(job_id, []),
                                     progress.get(job_id, []), run, tally)
                     for job_id in {**groups, **progress}]).done
        crashes = [crash for crash in (future.exception() for future in done) if crash is not None]
        if crashes:
            raise crashes[0]
        failure = run.failure
        for index, beat in beats:
            if failure is None or index < failure.index:
                tally.hear(beat)
        return failure

    def _skip_gone(self, shard_id: str, records: Sequence[ShardRecord],
                   groups: dict[str, list[tuple[int, OutboxEvent]]], run: _BatchRun, tally: BatchTally) -> None:
        """Drop from `groups` the jobs that no longer exist, counted in `tally.gone`: only jobs whose newest
        event is older than the shortest retention are looked up (one read for the batch), so fresh events
        cost nothing. A failed lookup fails the earliest record of the jobs looked up."""
        if self._jobs_table is None:
            return
        now = self._clock()
        old = [job_id for job_id, group in groups.items()
               if maybe_gone((event for _, event in group), now, self._policy.shortest_s)]
        if not old:
            return
        try:
            gone = gone_jobs(self._db, self._jobs_table, old, now)
        except Exception as error:  # noqa: BLE001 - delivered again from the earliest record looked up
            earliest = min(groups[job_id][0][0] for job_id in old)
            run.fail(earliest, error)
            return
        for job_id in sorted(gone):
            group = groups.pop(job_id)
            tally.gone += len(group)
            self._after_records(shard_id, [records[index] for index, _ in group])
        if gone:
            logger.info("events of jobs past their retention skipped: no view row for a gone job",
                        extra={"shard_id": shard_id, "gone": len(gone), "looked_up": len(old)})

    def _read(self, shard_id: str, record: ShardRecord,
              tally: BatchTally) -> OutboxEvent | Heartbeat | ProgressEvent | None:
        """A record's job event, progress event or heartbeat; None for an unreadable one, parked here."""
        try:
            return parse_record(record.data)
        except UnreadableRecord as error:
            self._parked.park(PROJECTOR_CONSUMER, shard_id, record.sequence_number, record.data, str(error),
                              stream_record=record.stream_record)
            tally.parked += 1
            logger.warning("record parked", extra={"shard_id": shard_id, "sequence_number": record.sequence_number,
                                                   "reason": str(error)})
            return None

    def _write_group(self, shard_id: str, records: Sequence[ShardRecord], group: list[tuple[int, OutboxEvent]],
                     progress: list[tuple[int, ProgressEvent]], run: _BatchRun, tally: BatchTally) -> None:
        """One job's events of a batch (with their indexes in it), in batch order, on a thread of the pool: its
        transitions, then its progress (judged against the version they leave: onward.pipeline.projector.progress)."""
        try:
            if group and not self._write_job(shard_id, records, group, run, tally):
                return
            if progress and run.proceeds(progress[0][0]):
                try:
                    self._progress.project([event for _, event in progress],
                                           max((event.version for _, event in group), default=None), tally.progress)
                except Exception as error:  # noqa: BLE001 - delivered again from the job's first progress record
                    run.fail(progress[0][0], error)
                    return
                self._after_records(shard_id, [records[index] for index, _ in progress])
        except BaseException:
            run.crash()
            raise

    def _write_job(self, shard_id: str, records: Sequence[ShardRecord], group: list[tuple[int, OutboxEvent]],
                        run: _BatchRun, tally: BatchTally) -> bool:
        """The job's events coalesced into one write; counted and past their fault points only once all of it
        (the write and any conflict kept) is done (True). An error fails the group's first record: the whole
        group is delivered again and judged afresh against the view."""
        first = group[0][0]
        if not run.proceeds(first):
            return False
        try:
            fault_point("projector.before_write", group[0][1].job_id)
            plan, writes = self.project_coalesced([event for _, event in group])
        except Exception as error:  # noqa: BLE001 - reported as the failure of the group's first record
            run.fail(first, error)
            return False
        for (_, event), outcome in zip(group, plan.outcomes, strict=True):
            tally.count(outcome, self._lag_ms(event) if outcome is ProjectionOutcome.APPLIED else None)
        tally.save(len(group) - writes)
        self._after_records(shard_id, [records[index] for index, _ in group])
        return True

    def _lag_ms(self, event: OutboxEvent) -> int:
        return self._clock() - epoch_ms(event.committed_at or event.occurred_at)

    @staticmethod
    def _after_records(shard_id: str, records: Sequence[ShardRecord]) -> None:
        """The fault point after `records` were projected, passed once by each: all of them, even when one's
        crashes (they were all projected, by one write), and then the first crash is raised."""
        crash: BaseException | None = None
        for record in records:
            try:
                fault_point("projector.after_record", f"{shard_id}:{record.sequence_number}")
            except BaseException as raised:  # noqa: BLE001 - raised below, once every record passed
                crash = crash or raised
        if crash is not None:
            raise crash

    def finish_batch(self, shard_id: str, tally: BatchTally) -> None:
        """Record the heartbeat slots the batch projected in the shard's watermark (and the shard's parents,
        once a heartbeat named them: they are drained, their watermarks retire). Events alone move nothing:
        one partition's event says nothing of the others'."""
        if tally.through:
            self._checkpoints.record_slots(PROJECTOR_CONSUMER, shard_id, tally.through, tally.slots,
                                           iso(self._clock()), parents=tally.parents)


def _job_of(data: bytes) -> str | None:
    """The job a record's event names, when it is one (a poison record is readable: it failed later)."""
    try:
        read = parse_record(data)
    except UnreadableRecord:
        return None
    return read.job_id if isinstance(read, OutboxEvent | ProgressEvent) else None
