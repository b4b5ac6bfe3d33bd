"""The local mappings handle a failed batch as Lambda's stream mappings do (onward_infra/pollers/failures.py):
bisected down to the failing record (a split is no retry), retried MaximumRetryAttempts times, then given up to
the on-failure destination (metadata only) while the shard reads on; records older than MaximumRecordAgeInSeconds
are given up unread. Without this the local stack retried a failing batch forever (a poison record froze its
shard, and the tests could not show that it no longer does on AWS).

Each test drives the projector's poller over a scripted Kinesis shard behind a real botocore client (no network).
"""

from __future__ import annotations

from typing import Any

import pytest

from onward_infra.pollers import DiscardedRecords, EventsStreamPoller, FailureHandling
from onward_infra.pollers.failures import FailedRecords, after_failure
from onward_infra_tests.pollers.test_poller_raw_records import (
    NO_BACKOFF,
    SHARD,
    NoPositions,
    ScriptedStream,
    kinesis_record,
)

ARRIVED = 1796188896.0
BISECTED = FailureHandling(maximum_retry_attempts=2, bisect_batch_on_function_error=True)


class Failing:
    """A handler that fails on the records of `bad` (sequence numbers): with a partial batch response naming the
    first of them, or by raising. It keeps each invocation's sequence numbers, and those it accepted."""

    def __init__(self, bad: set[str], raising: bool = False) -> None:
        self.bad = bad
        self.raising = raising
        self.invocations: list[list[str]] = []
        self.done: list[str] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        sequences = [record["kinesis"]["sequenceNumber"] for record in event["Records"]]
        self.invocations.append(sequences)
        failed = next((position for position, sequence in enumerate(sequences) if sequence in self.bad), None)
        if failed is not None and self.raising:
            raise ValueError("poison")
        self.done += sequences[:failed]
        return {"batchItemFailures": [] if failed is None else [{"itemIdentifier": sequences[failed]}]}


def poller(records: int, handler: Failing, handling: FailureHandling, discarded: list[DiscardedRecords],
           arrived: float = ARRIVED, now: float = ARRIVED + 1) -> EventsStreamPoller:
    scripted = ScriptedStream([kinesis_record(n, b"{}", arrived=arrived + n) for n in range(1, records + 1)])
    positions: Any = NoPositions()
    return EventsStreamPoller(scripted.client("kinesis"), "events", handler, positions, batch_size=10,
                              backoff=NO_BACKOFF, handling=handling, on_failure=discarded.append,
                              wall=lambda: now)


def poll(mapping: EventsStreamPoller, times: int = 30) -> None:
    for _ in range(times):
        mapping.poll_once()


def sequences(first: int, last: int) -> list[str]:
    return [str(n) for n in range(first, last + 1)]


def test_a_poison_record_is_bisected_to_retried_and_given_up_while_the_rest_of_its_shard_goes_through() -> None:
    """The partial response splits the batch at the failing record; its failed part is halved down to the record
    alone (no retry counted), which then gets 1 + MaximumRetryAttempts deliveries and is given up (its metadata to
    the destination): every other record is delivered and done."""
    handler, discarded = Failing({"5"}), []
    mapping = poller(10, handler, BISECTED, discarded)

    poll(mapping)

    assert handler.invocations[:7] == [sequences(1, 10), sequences(5, 10), sequences(5, 7), ["5", "6"],
                                       ["5"], ["5"], ["5"]]
    assert handler.done == [s for s in sequences(1, 10) if s != "5"]
    assert discarded == [DiscardedRecords("RetryAttemptsExhausted", SHARD, "5", "5", 1, ARRIVED + 5, ARRIVED + 5,
                                          "partial batch failure")]
    assert mapping.discarded.by_condition == {"RetryAttemptsExhausted": 1}
    assert not mapping.failing_shards


def test_a_function_error_is_bisected_in_halves_and_the_poison_record_alone_is_given_up() -> None:
    handler, discarded = Failing({"3"}, raising=True), []
    mapping = poller(4, handler, BISECTED, discarded)

    poll(mapping)

    assert handler.invocations[:5] == [sequences(1, 4), ["1", "2"], ["3", "4"], ["3"], ["3"]]
    assert handler.done == ["1", "2", "4"]
    assert [(d.start_sequence_number, d.batch_size, d.error) for d in discarded] == [("3", 1, "ValueError")]


def test_without_bisection_the_whole_failed_batch_is_retried_then_given_up() -> None:
    """As on Lambda: with no split, the batch is the unit of retries, and of what is discarded."""
    handler, discarded = Failing({"3"}, raising=True), []
    mapping = poller(4, handler, FailureHandling(maximum_retry_attempts=1), discarded)

    poll(mapping)

    assert handler.invocations == [sequences(1, 4), sequences(1, 4)]
    assert [(d.start_sequence_number, d.end_sequence_number, d.batch_size) for d in discarded] == [("1", "4", 4)]


def test_with_no_bound_a_failing_record_is_retried_for_ever() -> None:
    """Lambda's defaults (-1): what the template's mappings had before, and what froze a shard."""
    handler, discarded = Failing({"2"}), []
    mapping = poller(3, handler, FailureHandling(), discarded)

    poll(mapping, 20)

    assert handler.done == ["1"] and discarded == []
    assert len(handler.invocations) == 20


def test_records_older_than_the_maximum_age_are_given_up_unread() -> None:
    handler, discarded = Failing(set()), []
    mapping = poller(4, handler, FailureHandling(maximum_record_age_s=60), discarded,
                     now=ARRIVED + 2 + 60.5)  # records 1 and 2 arrived more than 60 s before

    poll(mapping)

    assert handler.done == ["3", "4"]
    assert [(d.condition, d.start_sequence_number, d.end_sequence_number) for d in discarded] == [
        ("RecordAgeExceeded", "1", "2")]


@pytest.mark.parametrize(("failed", "delivered", "index", "retry", "split", "sizes", "retries"), [
    (None, 10, 4, True, True, [6], 0),  # split at the failing record
    (None, 10, 0, True, True, [5, 5], 0),  # halved
    (FailedRecords([1, 3], 1), 1, 0, True, False, [1, 3], 2),  # one record: a retry
    (FailedRecords([1, 3], 2), 1, 0, False, False, [3], 0),  # retries spent: given up, the rest goes on
])
def test_the_verdict_after_a_failed_batch(failed: FailedRecords | None, delivered: int, index: int, retry: bool,
                                          split: bool, sizes: list[int], retries: int) -> None:
    verdict = after_failure(BISECTED, failed, delivered, index)
    assert (verdict.retry, verdict.split) == (retry, split)
    assert verdict.failed is not None
    assert (verdict.failed.sizes, verdict.failed.retries) == (sizes, retries)
