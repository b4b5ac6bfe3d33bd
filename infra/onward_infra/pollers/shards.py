"""What both local event source mappings share: every shard of a stream polled on its own (`ShardPoller`).

Shards are isolated, as Lambda's pollers are: whatever fails while one shard is polled (GetRecords, the
handler raising, an expired iterator) is logged without record contents, that shard resumes from its last
good position after a backoff of its own, and every other shard is still polled. A record that cannot become
a Lambda event (records.py) is parked with its raw JSON and the reason, and its shard continues after it.

A poller built with `concurrency` above one polls the readable shards of a poll at once, one thread each (as
Lambda runs one invocation per shard at a time): a shard is still polled by one thread at a time, its batches
in order, a child only once its parents are drained (in a further wave of the same poll), and a crash in one
shard's batch ends no other shard's. The handlers then run concurrently in this process: their Powertools
Metrics (one metric set per process) must be disabled (POWERTOOLS_METRICS_DISABLED, as on this machine), and
Logger's injected context may name another invocation's.

Each mapping keeps its own position per shard in the checkpoint table (Lambda's mappings keep theirs
internally, at no cost), where a poller created again (a restart) resumes after it. While a shard's records
keep flowing its position is written at most once per `POSITION_EVERY_S`, and exactly (at once) when a poll
of the shard delivers nothing (caught up), when the shard is read to its end, before the shard is read again
from a position (a partial batch failure, a parked record), when a crash (an exception that is not an
Exception: an injected crash, an interrupt) leaves a poll, and by `write_positions` when the poller stops.
So a death of the process (kill -9, power loss) redelivers, per shard, what came after the stored
position: at most about `POSITION_EVERY_S` of records more than a position written after every batch would;
the relay and the projector absorb redelivery (versions).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from botocore.exceptions import ClientError

from onward.domain.clock import iso, system_clock
from onward.pipeline.checkpoints import Checkpoint, CheckpointStore
from onward.pipeline.parking import ParkedRecords
from onward_infra.pollers.failures import (
    RECORD_AGE_EXCEEDED,
    RETRY_ATTEMPTS_EXHAUSTED,
    DiscardCount,
    DiscardedRecords,
    FailedRecords,
    FailureHandling,
    OnFailure,
    after_failure,
    after_success,
    log_discarded,
)
from onward_infra.pollers.records import RecordBatch, RecordReader, UnreadableRecord

Monotonic = Callable[[], float]
Invoke = Callable[[list[dict[str, Any]]], str | None]  # the handler on a batch: its lowest failed sequence number

AT_SEQUENCE_NUMBER = "AT_SEQUENCE_NUMBER"
AFTER_SEQUENCE_NUMBER = "AFTER_SEQUENCE_NUMBER"
TRIM_HORIZON = "TRIM_HORIZON"
EXPIRED_ITERATOR = "ExpiredIteratorException"
POSITION_EVERY_S = 1.0  # a shard's position is written at most this often while its records keep flowing

logger = Logger(service="onward-local-mappings")


def error_code(error: Exception) -> str | None:
    return error.response.get("Error", {}).get("Code") if isinstance(error, ClientError) else None


@dataclass(frozen=True)
class ShardBackoff:
    """How long a shard whose poll failed waits before it is polled again: `first_s`, doubled for each
    further failure in a row, at most `max_s`."""

    first_s: float = 0.5
    max_s: float = 30.0

    def delay_s(self, failures: int) -> float:
        growth: float = 2 ** (failures - 1)  # an int (a float below one failure)
        return min(self.max_s, self.first_s * growth)


@dataclass(frozen=True)
class StreamPosition:
    """Where a shard is read from again: at or after a sequence number."""

    iterator_type: str  # AT_SEQUENCE_NUMBER | AFTER_SEQUENCE_NUMBER
    sequence_number: str


@dataclass
class ShardCursor:
    """One shard's reading state: the live iterator, the last good position to re-create it from, its
    failures in a row, and how far it is done beyond its stored position."""

    iterator: str | None = None
    resume: StreamPosition | None = None  # None: from the consumer's stored position
    failures: int = 0
    retry_at: float = 0.0  # time.monotonic() before which the shard is not polled
    unwritten: str | None = None  # done up to this sequence number; not yet the stored position
    unwritten_since: float = 0.0  # monotonic time the oldest batch not in the stored position was done
    failed: FailedRecords | None = None  # records that failed, delivered again from `resume` (failures.py)


class ShardPoller(ABC):
    """What both mappings share: every shard polled on its own, a failing shard backed off."""

    def __init__(self, reader: RecordReader, source: str, stream: str, batch_size: int,
                 parked: ParkedRecords | None, backoff: ShardBackoff, monotonic: Monotonic,
                 positions: CheckpointStore, consumer: str, position_every_s: float, concurrency: int,
                 relist_every_s: float, handling: FailureHandling, on_failure: OnFailure | None,
                 wall: Callable[[], float]) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        if concurrency > 1 and not is_metrics_disabled():
            # The handlers' Powertools Metrics keep one metric set per process (a class attribute), which each
            # invocation flushes and clears: invocations at once would publish each other's values, and a
            # flush could meet another's add. Disabled (POWERTOOLS_METRICS_DISABLED), nothing is flushed.
            raise ValueError("shards polled at once need POWERTOOLS_METRICS_DISABLED: the handlers' metrics are "
                             "one set per process")
        self._reader = reader
        self._source = source  # the consumer the records are for: names it in logs and parked records
        self._stream = stream  # the stream's name or ARN, as its API takes it
        self._batch_size = batch_size
        self._parked = parked
        self._backoff = backoff
        self._monotonic = monotonic
        self._cursors: dict[str, ShardCursor] = {}
        self._drained: set[str] = set()  # closed shards read to their end
        self._positions = positions  # the mapping's own position per shard, under `consumer`
        self._consumer = consumer
        self._position_every_s = position_every_s
        self._concurrency = concurrency  # shards polled at once (1: one after another)
        self._pool: ThreadPoolExecutor | None = None  # started by the first concurrent poll
        self._relist_every_s = relist_every_s
        self._shards: list[dict[str, Any]] | None = None  # the latest listing, None before the first
        self._listed_at = 0.0  # monotonic time of the latest listing
        self._relist = False  # list again at the next poll: a shard ended or failed since the latest listing
        self._listed_closed: frozenset[str] = frozenset()  # shards the latest listing showed closed
        self._handling = handling  # what a failed batch leads to (failures.py)
        self._on_failure = on_failure or log_discarded  # where discarded records' metadata goes
        self._wall = wall  # epoch seconds, for the records' age
        self.discarded = DiscardCount()

    def poll_once(self) -> int:
        """One batch per readable shard; the number of records delivered to the handler or parked. A child
        shard is read only once its parents are drained. A shard that fails is skipped until its backoff
        ends; failing to list the shards raises. Zero means that no shard of a listing made during this
        call had a record to read (see the subclasses)."""
        listed_now = (self._shards is None or self._relist
                      or self._monotonic() - self._listed_at >= self._relist_every_s)
        shards = self._list() if listed_now else self._shards
        assert shards is not None
        polled: set[str] = set()
        taken = self._poll(lambda: _noting(self._readable(shards), polled))
        if taken or listed_now:
            return taken
        # Nothing on a listing from an earlier poll: list again, and read what it adds (new shards, and
        # shards read to their end that it may show closed, with their children), not the shards this poll
        # has read or tried (a failed one waits for its backoff, as in any poll).
        again = self._list()
        ended = {shard_id for shard_id in polled if self._ended(shard_id)}
        return self._poll(lambda: (shard_id for shard_id in self._readable(again)
                                   if shard_id not in polled or shard_id in ended))

    def _ended(self, shard_id: str) -> bool:
        """Read to its end (GetRecords answered no next iterator), not drained: not listed closed then."""
        cursor = self._cursors[shard_id]
        return cursor.iterator is None and not cursor.failures and shard_id not in self._drained

    def _list(self) -> list[dict[str, Any]]:
        shards = self._list_shards()
        self._shards, self._listed_at, self._relist = shards, self._monotonic(), False
        self._listed_closed = frozenset(shard["ShardId"] for shard in shards
                                        if "EndingSequenceNumber" in shard["SequenceNumberRange"])
        return shards

    @abstractmethod
    def _list_shards(self) -> list[dict[str, Any]]:
        """Every shard of the stream, page after page."""

    def _readable(self, shards: list[dict[str, Any]]) -> Iterator[str]:
        """The shards to poll, parents before children, as Lambda reads them after a split or a merge, decided
        as the poll reaches each: a parent drained earlier in the same poll lets its children be read in it
        too. A parent no longer listed (trimmed) holds nothing back."""
        listed = {shard["ShardId"] for shard in shards}
        parents_of: dict[str, set[str]] = {  # a trimmed parent is no longer listed: it holds nothing back
            shard["ShardId"]: {shard[key] for key in ("ParentShardId", "AdjacentParentShardId")
                               if shard.get(key) in listed}
            for shard in shards}

        generations: dict[str, int] = {}

        def generation(shard_id: str) -> int:
            if shard_id not in generations:
                generations[shard_id] = 0  # a cycle (never on AWS) cannot recurse forever
                generations[shard_id] = max((generation(p) + 1 for p in parents_of[shard_id]), default=0)
            return generations[shard_id]

        for shard_id in sorted(parents_of, key=generation):  # stable: listing order within a generation
            if shard_id not in self._drained and parents_of[shard_id] <= self._drained:
                yield shard_id

    @property
    def failing_shards(self) -> frozenset[str]:
        """Shards whose last poll failed (each waits out its backoff, then resumes from its last good
        position)."""
        return frozenset(shard_id for shard_id, cursor in self._cursors.items() if cursor.failures)

    @abstractmethod
    def _open(self, shard_id: str, position: StreamPosition | None) -> str:
        """An iterator at `position`, or at the consumer's stored position when None."""

    @abstractmethod
    def _poll_shard(self, shard_id: str, cursor: ShardCursor) -> int:
        """One batch of one shard; the records delivered to the handler or parked."""

    def _poll(self, readable: Callable[[], Iterable[str]]) -> int:
        """One batch of every shard `readable()` names (lazily, parents before children); the records taken.
        One shard after another, or with `concurrency` above one, the readable shards at once (waves: the
        children of parents drained in a wave are read in a further wave of the same poll)."""
        if self._concurrency <= 1:
            return self._poll_shards(readable())
        taken = 0
        polled: set[str] = set()
        while True:
            wave = [shard_id for shard_id in readable() if shard_id not in polled]
            if not wave:
                return taken
            polled.update(wave)
            drained = len(self._drained)
            taken += self._poll_wave(wave)
            if len(self._drained) == drained:  # no parent drained: no child became readable
                return taken

    def _poll_shards(self, shard_ids: Iterable[str]) -> int:
        """Poll each shard in turn (`shard_ids` is consumed lazily); the records taken from all of them."""
        taken = 0
        for shard_id in shard_ids:
            try:
                taken += self._poll_one(shard_id)
            except BaseException:
                self._write_positions_while_crashing()
                raise
        return taken

    def _poll_wave(self, shard_ids: list[str]) -> int:
        """Poll these shards at once, one thread each (as Lambda runs one invocation per shard at a time); the
        records taken. A crash (an exception that is not an Exception) in one shard's poll ends no other's:
        once every poll of the wave is over, what was done is kept (`_write_positions_while_crashing`) and the
        first crash is raised."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._concurrency, thread_name_prefix=f"{self._source}-shards")
        futures = [self._pool.submit(self._poll_one, shard_id) for shard_id in shard_ids]
        taken = 0
        crash: BaseException | None = None
        for future in futures:
            try:
                taken += future.result()
            except BaseException as error:  # noqa: BLE001 - every shard's poll ends before the crash goes on
                crash = crash or error
        if crash is not None:
            self._write_positions_while_crashing()
            raise crash
        return taken

    def _poll_one(self, shard_id: str) -> int:
        """One batch of one shard, unless it is backing off; the records taken. Its failure is the shard's
        (logged, backed off); a crash is raised with the shard left to be read again from its last good
        position (the caller keeps what is done)."""
        cursor = self._cursors.setdefault(shard_id, ShardCursor())
        if cursor.retry_at > self._monotonic():
            return 0
        try:
            taken = self._poll_shard(shard_id, cursor)
            if not taken or cursor.iterator is None:  # caught up, or read to its end
                self._write_position(shard_id, cursor)
        except Exception as error:  # noqa: BLE001 - one shard's failure must not stop the others
            self._shard_failed(shard_id, cursor, error)
            return 0
        except BaseException:  # a crash leaves the poll (an injected one, an interrupt): should this poller be
            # polled again (Lambda's mapping outlives a crashed invocation), the shard is read again from its
            # last good position: the crashed batch is delivered again
            cursor.iterator = None
            raise
        cursor.failures = 0
        return taken

    def close(self) -> None:
        """End the threads of concurrent polls (none with `concurrency` 1); the poller may be polled again."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def _shard_failed(self, shard_id: str, cursor: ShardCursor, error: Exception) -> None:
        cursor.iterator = None  # re-created from cursor.resume: an invalid iterator is not reused
        cursor.failures += 1
        delay_s = self._backoff.delay_s(cursor.failures)
        cursor.retry_at = self._monotonic() + delay_s
        self._relist = True  # the shard may be gone (trimmed): the next poll lists the stream again
        # The error's class and code only: its message may quote a record.
        logger.warning("polling a shard failed; it resumes from its last good position",
                       extra={"source": self._source, "shard_id": shard_id, "error": type(error).__name__,
                              "error_code": error_code(error), "failures": cursor.failures,
                              "retry_in_s": delay_s})

    def _read(self, shard_id: str, cursor: ShardCursor) -> RecordBatch:
        """The shard's next batch; an expired iterator is re-created from the last good position once."""
        if cursor.iterator is None:
            cursor.iterator = self._open(shard_id, cursor.resume)
        try:
            return self._reader.read(cursor.iterator, self._limit(cursor))
        except ClientError as error:
            if error_code(error) != EXPIRED_ITERATOR:
                raise
        cursor.iterator = self._open(shard_id, cursor.resume)
        return self._reader.read(cursor.iterator, self._limit(cursor))

    def _limit(self, cursor: ShardCursor) -> int:
        """The next batch's size: the mapping's, or that of the failed records' next batch (bisected)."""
        return min(self._batch_size, cursor.failed.sizes[0]) if cursor.failed else self._batch_size

    def _deliver(self, shard_id: str, cursor: ShardCursor, records: list[dict[str, Any]],
                 sequence_of: Callable[[dict[str, Any]], str], arrival_of: Callable[[dict[str, Any]], float],
                 invoke: Invoke) -> bool:
        """Hand `records` (read in stream order) to the function as Lambda's mapping does (failures.py): True
        when the shard reads on after them (delivered, or given up), False when it was moved back to deliver
        some again. Records too old are given up unread. A function error that is retried without a split
        is raised (the shard backs off, as Lambda's retries do); a partial batch response is retried at once.
        Whatever it returns, the records before the first failed one are done (`_remember`)."""
        now = self._wall()
        # The oldest records come first in a shard: those too old are a head of the batch.
        old = next((i for i, r in enumerate(records) if not self._handling.too_old(arrival_of(r), now)), len(records))
        fresh = records[old:]
        if old:
            self._discard(shard_id, RECORD_AGE_EXCEEDED, records[:old], sequence_of, arrival_of, None)
            self._remember(shard_id, cursor, sequence_of(records[old - 1]))
        if not fresh:
            cursor.failed = after_success(cursor.failed)
            return True
        error: Exception | None = None
        try:
            failed_sequence = invoke(fresh)
        except Exception as raised:  # noqa: BLE001 - a function error: Lambda's error handling decides
            error, failed_index = raised, 0
        else:
            if failed_sequence is None:
                cursor.failed = after_success(cursor.failed)
                return True
            failed_index = next((i for i, r in enumerate(fresh) if int(sequence_of(r)) >= int(failed_sequence)),
                                len(fresh))
            if failed_index == len(fresh):  # a sequence number past the batch: Lambda retries it whole
                failed_index = 0
        if failed_index:
            self._remember(shard_id, cursor, sequence_of(fresh[failed_index - 1]))
        verdict = after_failure(self._handling, cursor.failed, len(fresh), failed_index)
        cursor.failed = verdict.failed
        if not verdict.retry:
            self._discard(shard_id, RETRY_ATTEMPTS_EXHAUSTED, fresh[failed_index:], sequence_of, arrival_of,
                          type(error).__name__ if error is not None else "partial batch failure")
            self._remember(shard_id, cursor, sequence_of(fresh[-1]))
            return True
        self._move(shard_id, cursor, StreamPosition(AT_SEQUENCE_NUMBER, sequence_of(fresh[failed_index])))
        if error is not None and not verdict.split:
            raise error
        return False

    def _discard(self, shard_id: str, condition: str, records: list[dict[str, Any]],
                 sequence_of: Callable[[dict[str, Any]], str], arrival_of: Callable[[dict[str, Any]], float],
                 error: str | None) -> None:
        discarded = DiscardedRecords(condition, shard_id, sequence_of(records[0]), sequence_of(records[-1]),
                                     len(records), arrival_of(records[0]), arrival_of(records[-1]), error)
        self.discarded.add(discarded)
        self._on_failure(discarded)

    def _move(self, shard_id: str, cursor: ShardCursor, position: StreamPosition) -> None:
        self._write_position(shard_id, cursor)  # exact before the shard is read from a position again
        cursor.resume = position
        cursor.iterator = None  # set first: should opening fail, the shard is retried from `position`
        cursor.iterator = self._open(shard_id, position)

    def _remember(self, shard_id: str, cursor: ShardCursor, sequence_number: str) -> None:
        """The shard is done up to `sequence_number`: the mapping's own position, written once the oldest batch
        done since the last write is `position_every_s` old, else later by `_write_position`."""
        now = self._monotonic()
        if cursor.unwritten is None:
            cursor.unwritten_since = now
        cursor.unwritten = sequence_number
        if now - cursor.unwritten_since >= self._position_every_s:
            self._write_position(shard_id, cursor)

    def _write_position(self, shard_id: str, cursor: ShardCursor) -> None:
        """Store the shard's position now, if it moved since it was last stored (never backwards: the
        checkpoint store's update is conditional). Kept unwritten when the write fails."""
        if cursor.unwritten is None:
            return
        self._positions.advance(self._consumer, Checkpoint(shard_id, cursor.unwritten, iso(system_clock())))
        cursor.unwritten = None

    def write_positions(self) -> None:
        """Store every shard's position not stored yet: call it once the poller has stopped polling (a graceful
        stop then leaves exact positions behind)."""
        for shard_id, cursor in list(self._cursors.items()):
            self._write_position(shard_id, cursor)

    def _write_positions_while_crashing(self) -> None:
        """What was done before a crash that leaves the poller stays done: a supervisor that builds a new
        poller (as the soak's does) would otherwise redeliver up to `position_every_s` after every crash,
        and with crashes that frequent never move on. A failure to store is only logged: the crash goes on."""
        try:
            self.write_positions()
        except Exception as error:  # noqa: BLE001 - the crash under way is what the caller must see
            logger.warning("storing the positions before a crash failed; a new poller redelivers more",
                           extra={"source": self._source, "error": type(error).__name__,
                                  "error_code": error_code(error)})

    def _park(self, shard_id: str, record: UnreadableRecord) -> None:
        if self._parked is None:
            raise RuntimeError("an unreadable record and no parked table to set it aside in")
        reason = (f"this record of GetRecords cannot become a Lambda event ({record.reason}); "
                  f"stream {self._stream}, shard {shard_id}, sequence number {record.sequence_number}")
        self._parked.park(self._source, shard_id, record.sequence_number, record.raw, reason)
        logger.warning("parked an unreadable stream record", extra={
            "source": self._source, "shard_id": shard_id, "sequence_number": record.sequence_number})


def _noting(shard_ids: Iterable[str], seen: set[str]) -> Iterator[str]:
    """`shard_ids` as they are, each added to `seen` as it is taken."""
    for shard_id in shard_ids:
        seen.add(shard_id)
        yield shard_id
