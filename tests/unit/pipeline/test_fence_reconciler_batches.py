"""The fence reconciler's consumer without an endpoint: the Lambda event of the jobs table's stream, the batch
taken in order and stopped at its first failure, records from before the fence skipped, nothing done before a
failover (onward.pipeline.fence_reconciler.reconciler, onward.entrypoints.fence_reconciler)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onward.domain.regions import RegionEpoch
from onward.entrypoints.fence_reconciler import reconcile_event
from onward.pipeline.fence_reconciler.reconciler import FenceReconciler, JobsStreamRecord, ReconcileTally
from onward_infra.lambda_context import LocalLambdaContext

FENCED_AT = 1_000_000


def _row(job_id: str, epoch: int, state: str = "queued") -> dict[str, Any]:
    return {"pk": {"S": f"JOB#{job_id}"}, "sk": {"S": "JOB"}, "state": {"S": state}, "attempt": {"N": "0"},
            "version": {"N": "1"}, "region_epoch": {"N": str(epoch)}}


def _record(sequence: int, new: dict[str, Any], at_ms: int = FENCED_AT + 5_000) -> dict[str, Any]:
    return {"eventID": str(sequence), "eventName": "INSERT", "eventVersion": "1.1", "eventSource": "aws:dynamodb",
            "awsRegion": "us-west-2", "eventSourceARN": "arn:aws:dynamodb:us-west-2:1:table/t/stream/s",
            "dynamodb": {"SequenceNumber": str(sequence), "ApproximateCreationDateTime": at_ms / 1000,
                         "NewImage": new, "Keys": {"pk": new["pk"], "sk": new["sk"]}}}


@dataclass
class Authority:
    epoch: int
    failing: set[str]
    adopted: list[str]

    def region_epoch(self) -> RegionEpoch:
        return RegionEpoch(self.epoch, "us-west-2", "us-east-1", FENCED_AT if self.epoch else None, "t", "drill")

    def adopt(self, job_id: str, epoch: int, *, counted: bool = True) -> object | None:
        if job_id in self.failing:
            raise RuntimeError("throttled")
        self.adopted.append(job_id)
        return object()


class Table:
    """Answers GetItem with the item the record wrote: every row is still its record's new image."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self._rows = {row["pk"]["S"]: row for row in rows}

    def get_item(self, **request: Any) -> dict[str, Any]:
        return {"Item": self._rows[request["Key"]["pk"]["S"]]}


def _run(authority: Authority, records: list[dict[str, Any]]) -> tuple[dict[str, Any], ReconcileTally]:
    rows = [record["dynamodb"]["NewImage"] for record in records]
    reconciler = FenceReconciler(Table(rows), "jobs", authority)
    tally = ReconcileTally()
    response = reconcile_event({"Records": records}, LocalLambdaContext("onward-fence-reconciler"), reconciler, tally)
    return dict(response), tally


def test_a_failure_fails_that_record_and_every_one_after_it() -> None:
    """Lambda resumes at the lowest failed sequence number: reporting only the failed record would let the
    records after it count as done though they were never applied (or, applied past it, run out of order)."""
    authority = Authority(1, failing={"b"}, adopted=[])
    records = [_record(1, _row("a", 0)), _record(2, _row("b", 0)), _record(3, _row("c", 0))]
    response, tally = _run(authority, records)
    assert response["batchItemFailures"] == [{"itemIdentifier": "2"}, {"itemIdentifier": "3"}]
    assert authority.adopted == ["a"] and tally.adopted == 1


def test_nothing_is_done_before_a_failover() -> None:
    """At epoch 0 every item is current: adopting anything would restamp the home's own rows."""
    authority = Authority(0, failing=set(), adopted=[])
    response, tally = _run(authority, [_record(1, _row("a", 0))])
    assert response["batchItemFailures"] == [] and authority.adopted == [] and tally.skipped == 1


def test_records_committed_before_the_fence_are_left_to_the_adoption_pass() -> None:
    """Records from before the fence are what the adoption pass after it reads anyway: deciding them again
    from a stream read at its trim horizon would cost a write or a read for every job of the last 24 h."""
    authority = Authority(1, failing=set(), adopted=[])
    _, tally = _run(authority, [_record(1, _row("old", 0), at_ms=FENCED_AT - 10_000),
                                _record(2, _row("late", 0), at_ms=FENCED_AT + 60_000)])
    assert authority.adopted == ["late"] and tally.skipped == 1


def test_a_terminal_job_is_counted_restamped() -> None:
    """The counts say what the adoption did: a job the old home finished during the partition is kept as it is."""
    authority = Authority(1, failing=set(), adopted=[])
    _, tally = _run(authority, [_record(1, _row("done", 0, state="succeeded"))])
    assert (tally.adopted, tally.restamped) == (1, 1)


@dataclass
class CountingAuthority(Authority):
    reads: int = 0

    def region_epoch(self) -> RegionEpoch:
        self.reads += 1
        return super().region_epoch()


def test_a_warm_reconciler_reads_the_epoch_item_once_per_period_not_once_per_batch() -> None:
    """The idle cost (issue 39's gaps): without the cache every batch of the jobs-table stream costs a consistent
    GetItem of REGION/EPOCH, the same key each time. After the period it reads again, so a raise is seen within
    it (kept under the fence window: see FenceReconciler.__init__)."""
    authority = CountingAuthority(0, failing=set(), adopted=[])
    now = [0.0]
    reconciler = FenceReconciler(Table([_row("a", 0)]), "jobs", authority, epoch_ttl_s=5.0)
    reconciler._epoch._clock = lambda: now[0]  # (the cache's monotonic clock)
    for _ in range(20):
        assert reconciler.reconcile([], ReconcileTally()) is None
        now[0] += 0.2  # 20 batches in 4 s
    assert authority.reads == 1
    authority.epoch = 1
    now[0] += 1.0
    tally = ReconcileTally()
    reconciler.reconcile([JobsStreamRecord("9", None, _row("a", 0), FENCED_AT + 5_000)], tally)
    assert authority.reads == 2 and authority.adopted == ["a"] and tally.adopted == 1
