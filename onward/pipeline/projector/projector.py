"""The status projector: Kinesis events -> the status view, guarded by version.

Each event costs ONE conditional write: written when the view holds no version or an older one;
otherwise DynamoDB refuses and returns the view's item (ReturnValuesOnConditionCheckFailure=ALL_OLD), which
is enough to classify the refusal with no extra read: duplicate, stale, or conflict. A conflict (same
version, different content) is kept as its own item with both payloads and never overwrites the view.

The write is a PutItem, not an UpdateItem: a view item is derived from its event alone, so the whole item
is replaced; it costs the same write units and DynamoDB evaluates no update expression. That also keeps the
TTL right: a terminal status's row carries `expires_at` (onward.domain.projection.view_expires_at), a newer
non-terminal one (a replay) replaces it without. Kept conflicts and parked records expire after the same
retention, counted from when they were written.

A batch is written job by job at once (StatusProjector.project_batch): its events are grouped by job, the
groups run on a small thread pool shared by the process, and within a group the events are written in batch
order, so a job's events never overtake each other. A job's several events in one batch are folded into one
write of the newest when that is exact (fold_plan): the view row is derived from its event alone, so writing
the newest under the oldest's condition ends the same as writing each in turn, all of them applied.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, NamedTuple

from aws_lambda_powertools import Logger
from botocore.exceptions import ClientError
from pydantic import ValidationError

from onward.domain.clock import Clock, EpochMs, epoch_ms, iso, system_clock
from onward.domain.models import EVENT_SCHEMA, OutboxEvent
from onward.domain.projection import ProjectionOutcome, classify, view_fields, view_item
from onward.faults import fault_point
from onward.pipeline.checkpoints import PROJECTOR_CONSUMER, CheckpointStore
from onward.pipeline.heartbeats import Heartbeat, SlotId, decode_heartbeat, merge_through
from onward.pipeline.parking import ParkedRecords
from onward.settings import DAY_S, DEFAULT_JOB_RETENTION_DAYS
from onward.store.dynamo.attributes import from_item, to_item
from onward.store.dynamo.keys import ttl_after

logger = Logger(service="onward-projector")

WRITER_THREADS = 8  # a batch's jobs written at once: well under the client's connection pool (64)
# One pool for the process, built on import and kept (as a warm Lambda keeps it): every batch, of every shard the
# process reads, hands its jobs to it; a batch waits for its own jobs only.
_writers = ThreadPoolExecutor(max_workers=WRITER_THREADS, thread_name_prefix="onward-projector")


class UnreadableRecord(ValueError):
    """A record that is not a valid event of a schema this projector knows."""


def parse_record(data: bytes) -> OutboxEvent | Heartbeat:
    """A record's job event, or a pipeline heartbeat; UnreadableRecord says why it is neither."""
    try:
        payload = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UnreadableRecord(f"not JSON: {error}") from error
    if not isinstance(payload, dict):
        raise UnreadableRecord("not a JSON object")
    try:
        heartbeat = decode_heartbeat(payload)
    except ValidationError as error:
        raise UnreadableRecord(f"invalid heartbeat: {error.errors()[0]['msg']}") from error
    if heartbeat is not None:
        return heartbeat
    if payload.get("schema") != EVENT_SCHEMA:
        raise UnreadableRecord(f"unsupported schema {payload.get('schema')!r} (this projector reads {EVENT_SCHEMA})")
    try:
        return OutboxEvent.model_validate(payload)
    except ValidationError as error:
        raise UnreadableRecord(f"invalid event: {error.error_count()} errors: {error.errors()[0]['msg']}") from error


@dataclass(frozen=True)
class FoldedWrite:
    """One job's events of one batch written as ONE PutItem of the newest, on condition that the view holds no
    version of the job or one below `below` (the oldest event's): when the condition holds, each event would
    have been applied had they been written one by one, and the view ends the same."""

    newest: OutboxEvent
    below: int


def fold_plan(events: Sequence[OutboxEvent]) -> FoldedWrite | None:
    """How to write one job's events of a batch, given in batch order: one folded write when there are several
    and their versions rise strictly in batch order; None (one conditional write each, in order) otherwise:
    for a single event, and when a version repeats (the second is a duplicate or a conflict) or an older one
    follows a newer one (it is stale): only writing them one by one classifies those as it always has."""
    if len(events) < 2 or any(later.version <= earlier.version for earlier, later in pairwise(events)):
        return None
    return FoldedWrite(newest=events[-1], below=events[0].version)


class ShardRecord(NamedTuple):
    """One record of a shard's batch, as the event source delivers it."""

    sequence_number: str
    data: bytes


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
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def count(self, outcome: ProjectionOutcome, lag_ms: int | None = None) -> None:
        """One event's outcome, and its lag (commit to projected) when it was applied."""
        with self._lock:
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
            if lag_ms is not None:
                self.lag_ms.append(lag_ms)

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

    def snapshot(self) -> dict[str, int]:
        """Counts by outcome (applied, duplicate, stale, conflict) and parked, zero when none."""
        with self._lock:
            return {name: self._counts.get(name, 0) for name in [*(o.value for o in ProjectionOutcome), "parked"]}


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
    ) -> None:
        """`retention_s`: the job retention (Settings.job_retention_s), the TTL of terminal view rows and of
        kept conflicts."""
        self._db = client
        self._status = status_table
        self._conflicts = conflicts_table
        self._checkpoints = checkpoints
        self._parked = parked
        self._clock = clock
        self._retention_s = retention_s

    def project(self, event: OutboxEvent) -> ProjectionOutcome:
        """Write the view if `event` is newer than what it holds; one request on every common path."""
        held = self._put_view(event, below=event.version)
        if held is None:
            return ProjectionOutcome.APPLIED
        outcome = classify(held.get("version"), held.get("digest"), event)
        if outcome is ProjectionOutcome.CONFLICT:
            self._keep_conflict(event, held)
        return outcome

    def project_folded(self, fold: FoldedWrite) -> bool:
        """One write standing for a job's events of a batch (fold_plan): True when it was written (every one of
        them applied), False when the view holds a version at or above the oldest's (nothing was written:
        write them one by one to classify each)."""
        return self._put_view(fold.newest, below=fold.below) is None

    def _put_view(self, event: OutboxEvent, below: int) -> dict[str, Any] | None:
        """PutItem `event`'s view row if the view holds no version of the job or one below `below`: None when
        written, else the item the view holds (the refusal returns it: no read)."""
        item = to_item(view_item(event, iso(self._clock()), self._retention_s))
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
                "view_payload": {"S": json.dumps(held, sort_keys=True, default=str)},
                "incoming_payload": {"S": event.model_dump_json(by_alias=True)},
                "detected_at": {"S": iso(now)},
                "expires_at": {"N": str(ttl_after(now, self._retention_s))},
            },
        )
        logger.error("same-version conflict kept apart; the view is unchanged",
                     extra={"job_id": event.job_id, "version": event.version, "view_digest": held.get("digest"),
                            "incoming_digest": incoming["digest"]})

    def project_batch(self, shard_id: str, records: Sequence[ShardRecord], tally: BatchTally) -> BatchFailure | None:
        """Project one shard's batch; the earliest failure, None when every record was projected.

        First, in batch order on this thread: an unreadable record is parked with its raw bytes and the reason
        (the shard moves on), a heartbeat is kept for the tally, and the job events are grouped by job. Then
        the groups run on the pool at once, each writing its job's events in batch order (one folded write
        when fold_plan allows it, else one each); the heartbeats before the earliest failure are tallied.

        An error (a DynamoDB error, parking included) fails its record (a folded write's: the group's first)
        and ends its group; the other groups go on with the records before the earliest failure and skip
        those after it. Records after the failure that were written anyway are simply delivered again: the
        version guard absorbs them as duplicates.

        Each record passes the fault point `projector.after_record` (subject `<shard>:<sequence number>`)
        once projected: every record of a folded write passes it after that write. A fault point's exception
        (a drill's crash) stops every group before its next write and is raised once all have stopped.
        """
        run = _BatchRun()
        groups: dict[str, list[tuple[int, OutboxEvent]]] = {}
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
            if read is not None:
                beats.append((index, read))
            self._after_records(shard_id, [record])
        done = wait([_writers.submit(self._write_group, shard_id, records, group, run, tally)
                     for group in groups.values()]).done
        crashes = [crash for crash in (future.exception() for future in done) if crash is not None]
        if crashes:
            raise crashes[0]
        failure = run.failure
        for index, beat in beats:
            if failure is None or index < failure.index:
                tally.hear(beat)
        return failure

    def _read(self, shard_id: str, record: ShardRecord, tally: BatchTally) -> OutboxEvent | Heartbeat | None:
        """A record's job event or heartbeat; None for an unreadable one, parked here."""
        try:
            return parse_record(record.data)
        except UnreadableRecord as error:
            self._parked.park(PROJECTOR_CONSUMER, shard_id, record.sequence_number, record.data, str(error))
            tally.parked += 1
            logger.warning("record parked", extra={"shard_id": shard_id, "sequence_number": record.sequence_number,
                                                   "reason": str(error)})
            return None

    def _write_group(self, shard_id: str, records: Sequence[ShardRecord], group: list[tuple[int, OutboxEvent]],
                     run: _BatchRun, tally: BatchTally) -> None:
        """One job's events of a batch (with their indexes in it), in batch order, on a thread of the pool."""
        try:
            self._write_in_order(shard_id, records, group, run, tally)
        except BaseException:
            run.crash()
            raise

    def _write_in_order(self, shard_id: str, records: Sequence[ShardRecord], group: list[tuple[int, OutboxEvent]],
                        run: _BatchRun, tally: BatchTally) -> None:
        fold = fold_plan([event for _, event in group])
        if fold is not None:
            first = group[0][0]
            if not run.proceeds(first):
                return
            try:
                written = self.project_folded(fold)
            except Exception as error:  # noqa: BLE001 - reported as the failure of the group's first record
                run.fail(first, error)
                return
            if written:
                for _, event in group:
                    tally.count(ProjectionOutcome.APPLIED, self._lag_ms(event))
                self._after_records(shard_id, [records[index] for index, _ in group])
                return
        for index, event in group:
            if not run.proceeds(index):
                return
            try:
                outcome = self.project(event)
            except Exception as error:  # noqa: BLE001 - reported as this record's failure
                run.fail(index, error)
                return
            tally.count(outcome, self._lag_ms(event) if outcome is ProjectionOutcome.APPLIED else None)
            self._after_records(shard_id, [records[index]])

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
