"""Lambda's event source mappings, on this machine.

Each poller reads its source through the real AWS API of the embedded endpoint (DynamoDB Streams, Kinesis),
builds events of the exact shape Lambda sends, invokes the SAME handler that runs on AWS, and honours its
partial batch response the way Lambda does: the next batch starts at the lowest failed sequence number.

Shards are isolated, as Lambda's pollers are: whatever fails while one shard is polled (GetRecords, the
handler raising, an expired iterator) is logged without record contents, that shard resumes from its last
good position after a backoff of its own, and every other shard is still polled. GetRecords answers are
read from their raw JSON, which is already the shape of Lambda's event, not walked by botocore's parser
(`RecordReader`); a record that cannot become a Lambda event is parked with its raw JSON and the reason, and
its shard continues after it.

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

import base64
import binascii
import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from botocore.exceptions import BotoCoreError, ClientError

from onward.domain.clock import iso, system_clock
from onward.pipeline.checkpoints import PROJECTOR_CONSUMER, RELAY_CONSUMER, Checkpoint, CheckpointStore
from onward.pipeline.parking import ParkedRecords
from onward.pipeline.relay.relay import Relay
from onward_infra.lambda_context import LocalLambdaContext

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
Monotonic = Callable[[], float]
REGION = "us-east-1"

AT_SEQUENCE_NUMBER = "AT_SEQUENCE_NUMBER"
AFTER_SEQUENCE_NUMBER = "AFTER_SEQUENCE_NUMBER"
TRIM_HORIZON = "TRIM_HORIZON"
EXPIRED_ITERATOR = "ExpiredIteratorException"
INSERT = "INSERT"
RAW_ANSWER_HOOK = "onward-local-mappings-raw-get-records"
RELIST_EVERY_S = 3.0  # the outbox poller lists the stream's shards again at least this often while busy
POSITION_EVERY_S = 1.0  # a shard's position is written at most this often while its records keep flowing

logger = Logger(service="onward-local-mappings")


def _failed_sequence(response: dict[str, Any]) -> str | None:
    failures = response.get("batchItemFailures") or []
    return min((f["itemIdentifier"] for f in failures), key=int) if failures else None


def _error_code(error: Exception) -> str | None:
    return error.response.get("Error", {}).get("Code") if isinstance(error, ClientError) else None


# --- reading records as the service wrote them ---------------------------------------------------------------

@dataclass(frozen=True)
class UnreadableRecord:
    """A stream record that cannot become a record of a Lambda event, as the service sent it."""

    sequence_number: str
    raw: bytes  # the record's JSON from the service's answer (the whole one-record answer when not JSON)
    event_name: str | None  # DynamoDB stream records: INSERT, MODIFY, REMOVE; Kinesis records: None
    reason: str  # what is wrong with it


@dataclass(frozen=True)
class RecordBatch:
    """One GetRecords answer: its records as the service wrote them (the JSON wire shape: timestamps as
    epoch seconds, binary values as base64 text), in stream order, up to the first unreadable one if any."""

    records: list[dict[str, Any]]
    next_iterator: str | None
    unreadable: UnreadableRecord | None = None  # the record that ended the batch; read on after it


RecordFault = Callable[[dict[str, Any]], str | None]  # why a record cannot become a Lambda event; None: it can


class _UnparsableAnswer(Exception):
    """GetRecords answered 200 with a body that is not a JSON object holding a list of Records."""

    def __init__(self, body: bytes, error: Exception) -> None:
        super().__init__(type(error).__name__)
        self.body = body
        self.error = error


class _AnswerInFlight(threading.local):
    """The reader's GetRecords call under way on this thread (botocore parses on the caller's thread)."""

    wanted = False  # the call is a RecordReader's: its 200 answer is taken raw
    taken = False  # the hook took the answer raw (it is in the response, botocore parsed nothing)
    body: bytes | None = None  # the answer's body, when the hook saw the answer and did not take it


_in_flight = _AnswerInFlight()


def _take_raw_answer(response_dict: dict[str, Any], customized_response_dict: dict[str, Any],
                     **_: Any) -> None:
    """botocore's `before-parse` hook on a reader's client: a 200 answer to the reader's own GetRecords is
    loaded from its JSON as it is into `customized_response_dict` (botocore merges it into the response),
    and botocore's parser is given an empty object, so that it walks no record. Any other answer (an error,
    a body that is not a JSON object with Records) is parsed by botocore as ever, and so is any other
    caller's GetRecords on the same client."""
    if not _in_flight.wanted:
        return
    body = response_dict.get("body")
    if response_dict.get("status_code") != 200 or not isinstance(body, bytes):
        return  # botocore parses the error and raises it
    _in_flight.body = body
    try:
        answer = json.loads(body)
    except ValueError:  # UnicodeDecodeError included
        return
    if isinstance(answer, dict) and isinstance(answer.get("Records"), list):
        customized_response_dict.update(answer)
        response_dict["body"] = b"{}"
        _in_flight.taken, _in_flight.body = True, None


def _is_epoch(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_sequence_number(value: Any) -> bool:
    return isinstance(value, str) and value.isascii() and value.isdigit()


def _named_sequence(record: Any, sequence_of: Callable[[dict[str, Any]], str]) -> str | None:
    try:
        sequence_number = sequence_of(record)
    except (KeyError, TypeError, AttributeError):
        return None
    return sequence_number if _is_sequence_number(sequence_number) else None


class RecordReader:
    """GetRecords on one client (DynamoDB Streams or Kinesis) that reads the records of a 200 answer from its
    raw JSON, not through botocore's parser (which walks every attribute of every record only for the event
    to be written back into that same JSON shape), and isolates a record that cannot be read.

    botocore still signs, sends, retries and parses every other answer: an error answer (an expired
    iterator, a throttle) raises botocore's ClientError exactly as without this reader. The raw answer is
    taken by a `before-parse` hook registered on the client, for this reader's calls only; a client without
    `meta` (a test's fake) must answer records in the wire shape itself.

    A record "cannot be read" when it cannot become the record of a Lambda event (what `fault` says of it:
    a missing or mistyped field that the poller or the event needs, such as a sequence number, a timestamp
    that is not epoch seconds, an image that is not a map, Kinesis data that is not base64), or when the
    answer holding it is not JSON (bytes that are not UTF-8): then the batch is read again one record at a
    time from the same iterator, and the record whose own answer is not JSON is found by decoding that
    answer leniently. Either way it ends the batch as `unreadable` and its shard reads on after it, so one
    bad record never blocks its shard. What the handler makes of a record's contents is the handler's
    business, as on AWS: the attribute values of a DynamoDB image are not looked into (the relay parks an
    image it cannot read). A record without a sequence number, or an answer that names no record at all,
    raises: that is a broken service, not a record to set aside (its shard backs off and retries)."""

    def __init__(self, client: Any, sequence_of: Callable[[dict[str, Any]], str], fault: RecordFault) -> None:
        self._client = client
        self._sequence_of = sequence_of
        self._fault = fault
        meta = getattr(client, "meta", None)
        self._raw = meta is not None
        if meta is not None:
            service = meta.service_model.service_id.hyphenize()
            meta.events.register(f"before-parse.{service}.GetRecords", _take_raw_answer,
                                 unique_id=RAW_ANSWER_HOOK)

    def read(self, iterator: str, limit: int) -> RecordBatch:
        try:
            answer = self._get_records(iterator, limit)
        except _UnparsableAnswer:
            return self._read_one_by_one(iterator, limit)
        return self._batch(answer)

    def _batch(self, answer: dict[str, Any]) -> RecordBatch:
        """The answer's records up to the first that cannot be read (which ends the batch)."""
        records: list[dict[str, Any]] = answer["Records"]
        for position, record in enumerate(records):
            reason = self._fault(record) if isinstance(record, dict) else "not a JSON object"
            if reason is not None:
                return RecordBatch(records[:position], None, self._unreadable(record, reason))
        return RecordBatch(records, answer.get("NextShardIterator"))

    def _get_records(self, iterator: str, limit: int) -> dict[str, Any]:
        if not self._raw:
            fake_answer: dict[str, Any] = self._client.get_records(ShardIterator=iterator, Limit=limit)
            return fake_answer
        _in_flight.wanted, _in_flight.taken, _in_flight.body = True, False, None
        try:
            response: dict[str, Any] = self._client.get_records(ShardIterator=iterator, Limit=limit)
        except (ClientError, BotoCoreError):
            raise  # the service refused, or the connection failed: nothing to read
        except Exception as error:  # botocore's parser failed on a body the hook did not take
            body = _in_flight.body
            if body is None:
                raise
            raise _UnparsableAnswer(body, error) from error
        finally:
            _in_flight.wanted = False
        body, _in_flight.body = _in_flight.body, None  # not kept: a Kinesis answer can hold megabytes
        if _in_flight.taken:
            return response
        if body is not None:
            raise _UnparsableAnswer(body, ValueError("not a JSON object with a list of Records"))
        return response  # answered without the endpoint (a wrapper of the client): as the wrapper wrote it

    def _read_one_by_one(self, iterator: str, limit: int) -> RecordBatch:
        records: list[dict[str, Any]] = []
        for _ in range(limit):
            try:
                batch = self._batch(self._get_records(iterator, 1))
            except _UnparsableAnswer as unparsable:
                return RecordBatch(records, None, self._unreadable_answer(unparsable))
            records += batch.records
            if batch.unreadable is not None or not batch.records or batch.next_iterator is None:
                return RecordBatch(records, batch.next_iterator, batch.unreadable)
            iterator = batch.next_iterator
        return RecordBatch(records, iterator)

    def _unreadable(self, record: Any, reason: str) -> UnreadableRecord:
        sequence_number = _named_sequence(record, self._sequence_of)
        if sequence_number is None:
            raise ValueError(f"GetRecords answered a record without a sequence number ({reason})")
        event_name = record.get("eventName")
        return UnreadableRecord(sequence_number, json.dumps(record, separators=(",", ":")).encode(),
                                event_name if isinstance(event_name, str) else None, reason)

    def _unreadable_answer(self, unparsable: _UnparsableAnswer) -> UnreadableRecord:
        """The single record of a Limit=1 answer that is not JSON, found by decoding it leniently (bytes that
        are not UTF-8 replaced), with the answer's bytes as sent; the decoding's own error when the answer
        names no record even so."""
        try:
            (record,) = json.loads(unparsable.body.decode("utf-8", errors="replace"))["Records"]
        except (ValueError, KeyError, TypeError):
            raise unparsable.error from None
        sequence_number = _named_sequence(record, self._sequence_of)
        if sequence_number is None:
            raise unparsable.error
        event_name = record.get("eventName")
        reason = f"its answer is not JSON ({type(unparsable.error).__name__}: {unparsable.error})"
        return UnreadableRecord(sequence_number, unparsable.body,
                                event_name if isinstance(event_name, str) else None, reason)


# --- one poller per source, shard by shard ------------------------------------------------------------------

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
class _ShardCursor:
    """One shard's reading state: the live iterator, the last good position to re-create it from, its
    failures in a row, and how far it is done beyond its stored position."""

    iterator: str | None = None
    resume: StreamPosition | None = None  # None: from the consumer's stored position
    failures: int = 0
    retry_at: float = 0.0  # time.monotonic() before which the shard is not polled
    unwritten: str | None = None  # done up to this sequence number; not yet the stored position
    unwritten_since: float = 0.0  # monotonic time the oldest batch not in the stored position was done


class _ShardPoller(ABC):
    """What both mappings share: every shard polled on its own, a failing shard backed off."""

    def __init__(self, reader: RecordReader, source: str, stream: str, batch_size: int,
                 parked: ParkedRecords | None, backoff: ShardBackoff, monotonic: Monotonic,
                 positions: CheckpointStore, consumer: str, position_every_s: float, concurrency: int,
                 relist_every_s: float) -> None:
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
        self._cursors: dict[str, _ShardCursor] = {}
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
    def _poll_shard(self, shard_id: str, cursor: _ShardCursor) -> int:
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
        cursor = self._cursors.setdefault(shard_id, _ShardCursor())
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

    def _shard_failed(self, shard_id: str, cursor: _ShardCursor, error: Exception) -> None:
        cursor.iterator = None  # re-created from cursor.resume: an invalid iterator is not reused
        cursor.failures += 1
        delay_s = self._backoff.delay_s(cursor.failures)
        cursor.retry_at = self._monotonic() + delay_s
        self._relist = True  # the shard may be gone (trimmed): the next poll lists the stream again
        # The error's class and code only: its message may quote a record.
        logger.warning("polling a shard failed; it resumes from its last good position",
                       extra={"source": self._source, "shard_id": shard_id, "error": type(error).__name__,
                              "error_code": _error_code(error), "failures": cursor.failures,
                              "retry_in_s": delay_s})

    def _read(self, shard_id: str, cursor: _ShardCursor) -> RecordBatch:
        """The shard's next batch; an expired iterator is re-created from the last good position once."""
        if cursor.iterator is None:
            cursor.iterator = self._open(shard_id, cursor.resume)
        try:
            return self._reader.read(cursor.iterator, self._batch_size)
        except ClientError as error:
            if _error_code(error) != EXPIRED_ITERATOR:
                raise
        cursor.iterator = self._open(shard_id, cursor.resume)
        return self._reader.read(cursor.iterator, self._batch_size)

    def _move(self, shard_id: str, cursor: _ShardCursor, position: StreamPosition) -> None:
        self._write_position(shard_id, cursor)  # exact before the shard is read from a position again
        cursor.resume = position
        cursor.iterator = None  # set first: should opening fail, the shard is retried from `position`
        cursor.iterator = self._open(shard_id, position)

    def _remember(self, shard_id: str, cursor: _ShardCursor, sequence_number: str) -> None:
        """The shard is done up to `sequence_number`: the mapping's own position, written once the oldest batch
        done since the last write is `position_every_s` old, else later by `_write_position`."""
        now = self._monotonic()
        if cursor.unwritten is None:
            cursor.unwritten_since = now
        cursor.unwritten = sequence_number
        if now - cursor.unwritten_since >= self._position_every_s:
            self._write_position(shard_id, cursor)

    def _write_position(self, shard_id: str, cursor: _ShardCursor) -> None:
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
                                  "error_code": _error_code(error)})

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


def _stream_record_sequence(record: dict[str, Any]) -> str:
    sequence_number: str = record["dynamodb"]["SequenceNumber"]
    return sequence_number


def _kinesis_record_sequence(record: dict[str, Any]) -> str:
    sequence_number: str = record["SequenceNumber"]
    return sequence_number


def dynamodb_record_fault(record: dict[str, Any]) -> str | None:
    """Why a DynamoDB Streams record (wire shape) cannot become the record of a Lambda event; None when it
    can. Only what the poller and the event need is looked at, never the images' attribute values."""
    change = record.get("dynamodb")
    if not isinstance(change, dict):
        return "no dynamodb member (an object)"
    if not _is_sequence_number(change.get("SequenceNumber")):
        return "dynamodb.SequenceNumber is not a sequence number"
    if not isinstance(record.get("eventID"), str) or not isinstance(record.get("eventName"), str):
        return "no eventID or eventName (strings)"
    if not _is_epoch(change.get("ApproximateCreationDateTime")):
        return "dynamodb.ApproximateCreationDateTime is not epoch seconds"
    for image in ("Keys", "NewImage", "OldImage"):
        if image in change and not isinstance(change[image], dict):
            return f"dynamodb.{image} is not a map"
    return None


def kinesis_record_fault(record: dict[str, Any]) -> str | None:
    """Why a Kinesis record (wire shape) cannot become the record of a Lambda event; None when it can."""
    if not _is_sequence_number(record.get("SequenceNumber")):
        return "SequenceNumber is not a sequence number"
    if not isinstance(record.get("PartitionKey"), str):
        return "no PartitionKey (a string)"
    if not _is_epoch(record.get("ApproximateArrivalTimestamp")):
        return "ApproximateArrivalTimestamp is not epoch seconds"
    data = record.get("Data")
    if not isinstance(data, str):
        return "Data is not base64 text"
    try:
        base64.b64decode(data, validate=True)
    except binascii.Error as error:
        return f"Data is not valid base64 ({error})"
    return None


def dynamodb_lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """The record of the Lambda event for a DynamoDB Streams record (wire shape, `dynamodb_record_fault`
    None): its change as the service wrote it (images untouched, binary values as base64 text), the time as
    float epoch seconds."""
    dynamodb = dict(record["dynamodb"])
    dynamodb["ApproximateCreationDateTime"] = float(dynamodb["ApproximateCreationDateTime"])
    return {
        "eventID": record["eventID"],
        "eventName": record["eventName"],
        "eventVersion": record.get("eventVersion", "1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": record.get("awsRegion", REGION),
        "dynamodb": dynamodb,
        "eventSourceARN": stream_arn,
    }


def kinesis_lambda_record(record: dict[str, Any], shard_id: str, stream_arn: str) -> dict[str, Any]:
    """The record of the Lambda event for a Kinesis record (wire shape, `kinesis_record_fault` None): its
    data as the base64 text the service sent, the arrival time as float epoch seconds."""
    return {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": record["PartitionKey"],
            "sequenceNumber": record["SequenceNumber"],
            "data": record["Data"],
            "approximateArrivalTimestamp": float(record["ApproximateArrivalTimestamp"]),
        },
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": f"{shard_id}:{record['SequenceNumber']}",
        "eventName": "aws:kinesis:record",
        "invokeIdentityArn": "arn:aws:iam::123456789012:role/onward-projector",
        "awsRegion": REGION,
        "eventSourceARN": stream_arn,
    }


class OutboxStreamPoller(_ShardPoller):
    """The relay's event source: the outbox table's DynamoDB stream, INSERT records only (the filter
    template.yaml puts on the mapping), batches of `batch_size`. Its position per shard (what Lambda's
    mapping keeps for itself) is kept in the checkpoint table as `consumer`; when the stream was trimmed
    past it, the relay re-publishes from the outbox first. An unreadable INSERT is parked in `parked`
    (source "relay"); without `parked` its shard stays on it, backed off.

    Every shard is read, as Lambda's mapping reads them: the shards DescribeStream lists (page by page), a
    child only once its parent is drained (listed as closed, and read to its end: GetRecords answered no
    NextShardIterator), so that an item's records from before a split reach the handler before those after
    it. The events name the stream, never the shard (eventSourceARN is the stream's ARN).

    The listing is kept between polls, not asked for in every one: the stream is described again when a
    shard was read to its end (a split or a rollover closed it: its children are listed now), when a
    shard failed (it may have been trimmed away), at least every `relist_every_s` while polls keep
    finding records (an open shard's split, and any shard added, is seen while its parent is still being
    read), and before a poll answers that it found nothing: a poll that takes no record has read every
    shard of a listing made during it, so polling until idle still means the whole stream is read."""

    def __init__(self, streams: Any, stream_arn: str, handler: Handler, relay: Relay, positions: CheckpointStore,
                 batch_size: int = 100, consumer: str = "local-mapping:relay", *,
                 parked: ParkedRecords | None = None, backoff: ShardBackoff = ShardBackoff(),
                 monotonic: Monotonic = time.monotonic, relist_every_s: float = RELIST_EVERY_S,
                 position_every_s: float = POSITION_EVERY_S, concurrency: int = 1) -> None:
        super().__init__(RecordReader(streams, _stream_record_sequence, dynamodb_record_fault), RELAY_CONSUMER,
                         stream_arn, batch_size, parked, backoff, monotonic, positions, consumer, position_every_s,
                         concurrency, relist_every_s)
        self._streams = streams
        self._arn = stream_arn
        self._handler = handler
        self._relay = relay

    def _iterator(self, shard_id: str, kind: str, sequence_number: str | None = None) -> str:
        request = {"StreamArn": self._arn, "ShardId": shard_id, "ShardIteratorType": kind}
        if sequence_number is not None:
            request["SequenceNumber"] = sequence_number
        iterator: str = self._streams.get_shard_iterator(**request)["ShardIterator"]
        return iterator

    def _open(self, shard_id: str, position: StreamPosition | None) -> str:
        if position is None:
            stored = self._positions.checkpoint(self._consumer, shard_id)
            if stored is None:
                return self._iterator(shard_id, TRIM_HORIZON)
            position = StreamPosition(AFTER_SEQUENCE_NUMBER, stored.sequence_number)
        try:
            return self._iterator(shard_id, position.iterator_type, position.sequence_number)
        except ClientError as error:
            if _error_code(error) != "TrimmedDataAccessException":
                raise
            self._relay.recover()
            return self._iterator(shard_id, TRIM_HORIZON)

    def _list_shards(self) -> list[dict[str, Any]]:
        """Every shard of the stream: DescribeStream, page after page (ExclusiveStartShardId)."""
        shards: list[dict[str, Any]] = []
        request: dict[str, Any] = {"StreamArn": self._arn}
        while True:
            description = self._streams.describe_stream(**request)["StreamDescription"]
            shards += description["Shards"]
            last = description.get("LastEvaluatedShardId")
            if not last:
                return shards
            request["ExclusiveStartShardId"] = last

    def _poll_shard(self, shard_id: str, cursor: _ShardCursor) -> int:
        batch = self._read(shard_id, cursor)
        inserts = [r for r in batch.records if r["eventName"] == INSERT]
        if inserts:
            result = self._handler({"Records": [dynamodb_lambda_record(r, self._arn) for r in inserts]},
                                   LocalLambdaContext("onward-relay"))
            failed = _failed_sequence(result)
            if failed is not None:
                done = [r for r in inserts if int(_stream_record_sequence(r)) < int(failed)]
                if done:
                    self._remember(shard_id, cursor, _stream_record_sequence(done[-1]))
                self._move(shard_id, cursor, StreamPosition(AT_SEQUENCE_NUMBER, failed))
                return len(inserts)
        taken = len(inserts)
        if batch.unreadable is not None:
            if batch.unreadable.event_name == INSERT:  # the mapping's filter drops the others unread
                self._park(shard_id, batch.unreadable)
                taken += 1
            self._remember(shard_id, cursor, batch.unreadable.sequence_number)
            self._move(shard_id, cursor, StreamPosition(AFTER_SEQUENCE_NUMBER,
                                                        batch.unreadable.sequence_number))
            return taken
        if batch.records:
            last = _stream_record_sequence(batch.records[-1])
            if inserts:
                self._remember(shard_id, cursor, last)
            cursor.resume = StreamPosition(AFTER_SEQUENCE_NUMBER, last)
        cursor.iterator = batch.next_iterator
        if batch.next_iterator is None:
            if shard_id in self._listed_closed:  # a closed shard, read to its end
                self._drained.add(shard_id)
            # Either way the listing is behind: a drained shard's children may be missing from it, and a
            # shard that ended while listed open is closed now (it drains once a listing says so).
            self._relist = True
        return taken



class EventsStreamPoller(_ShardPoller):
    """The projector's event source: every shard of the Kinesis events stream, batches of `batch_size`.
    Its position (what Lambda's mapping keeps for itself) is kept in the checkpoint table as `consumer`.
    An unreadable record is parked in `parked` (source "projector"); without `parked` its shard stays on
    it, backed off, while the other shards go on.

    The shards ListShards lists are kept between polls as the outbox poller keeps its listing (listed again
    when a shard ended or failed, every `relist_every_s` while polls find records, and before a poll
    answers that it found nothing): a ListShards per poll was about a third of the projector's requests
    in a burst, and ListShards is throttled per stream on AWS."""

    def __init__(self, kinesis: Any, stream_name: str, handler: Handler, positions: CheckpointStore,
                 batch_size: int = 100, consumer: str = "local-mapping:projector", *,
                 parked: ParkedRecords | None = None, backoff: ShardBackoff = ShardBackoff(),
                 monotonic: Monotonic = time.monotonic, relist_every_s: float = RELIST_EVERY_S,
                 position_every_s: float = POSITION_EVERY_S, concurrency: int = 1) -> None:
        super().__init__(RecordReader(kinesis, _kinesis_record_sequence, kinesis_record_fault),
                         PROJECTOR_CONSUMER, stream_name, batch_size, parked, backoff, monotonic, positions,
                         consumer, position_every_s, concurrency, relist_every_s)
        self._kinesis = kinesis
        self._handler = handler
        self._arn = kinesis.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]["StreamARN"]

    def _open(self, shard_id: str, position: StreamPosition | None) -> str:
        request: dict[str, Any] = {"StreamName": self._stream, "ShardId": shard_id}
        if position is None:
            stored = self._positions.checkpoint(self._consumer, shard_id)
            position = StreamPosition(AFTER_SEQUENCE_NUMBER, stored.sequence_number) if stored else None
        if position is None:
            request["ShardIteratorType"] = TRIM_HORIZON
        else:
            request |= {"ShardIteratorType": position.iterator_type,
                        "StartingSequenceNumber": position.sequence_number}
        iterator: str = self._kinesis.get_shard_iterator(**request)["ShardIterator"]
        return iterator

    def _list_shards(self) -> list[dict[str, Any]]:
        """Every shard of the stream: ListShards, page after page (NextToken)."""
        answer = self._kinesis.list_shards(StreamName=self._stream)
        shards: list[dict[str, Any]] = answer["Shards"]
        while answer.get("NextToken"):
            answer = self._kinesis.list_shards(NextToken=answer["NextToken"])
            shards += answer["Shards"]
        return shards

    def _poll_shard(self, shard_id: str, cursor: _ShardCursor) -> int:
        batch = self._read(shard_id, cursor)
        taken = 0
        if batch.records:
            result = self._handler({"Records": [kinesis_lambda_record(r, shard_id, self._arn)
                                                for r in batch.records]},
                                   LocalLambdaContext("onward-projector"))
            taken = len(batch.records)
            failed = _failed_sequence(result)
            if failed is not None:
                done = [r for r in batch.records if int(_kinesis_record_sequence(r)) < int(failed)]
                if done:
                    self._remember(shard_id, cursor, _kinesis_record_sequence(done[-1]))
                self._move(shard_id, cursor, StreamPosition(AT_SEQUENCE_NUMBER, failed))
                return taken
            self._remember(shard_id, cursor, _kinesis_record_sequence(batch.records[-1]))
        if batch.unreadable is not None:
            self._park(shard_id, batch.unreadable)
            self._remember(shard_id, cursor, batch.unreadable.sequence_number)
            self._move(shard_id, cursor, StreamPosition(AFTER_SEQUENCE_NUMBER,
                                                        batch.unreadable.sequence_number))
            return taken + 1
        if batch.records:
            cursor.resume = StreamPosition(AFTER_SEQUENCE_NUMBER, _kinesis_record_sequence(batch.records[-1]))
        cursor.iterator = batch.next_iterator
        if batch.next_iterator is None:  # a closed shard (split, merged), read to its end
            if not batch.records:
                self._drained.add(shard_id)
            self._relist = True  # its children may be missing from the listing
        return taken

