"""The archive's Firehose sink (onward.pipeline.archive.firehose) over a fake client: batches within
PutRecordBatch's limits, the entries a partial failure names sent again (and only those), an error when some
never go, and a record over Firehose's limit refused before anything is sent."""

from __future__ import annotations

import json
from typing import Any

import pytest

from onward.domain.archive import ArchivedEvent, ArchivedJob, ArchivedRun
from onward.domain.models import MAX_ERROR_MESSAGE
from onward.pipeline.archive.firehose import (
    MAX_BYTES_PER_REQUEST,
    MAX_RECORD_BYTES,
    MAX_RECORDS_PER_REQUEST,
    ArchiveWriteFailed,
    FirehoseArchive,
    RecordTooLarge,
    batches,
    encode,
)


def _record(job_id: str, *, summary: str | None = None, runs: int = 1, events: int = 1,
            message: str = "boom", params: str = "{}") -> ArchivedJob:
    return ArchivedJob(
        job_id=job_id, tenant="acme", type="t", state="succeeded", version=3, attempts=runs, max_attempts=100,
        priority=0, created_ms=1_000, finished_ms=5_000, waited_ms=10, ran_ms=20, params_json=params,
        result_summary=summary, archived_ms=9, day="2026-12-04", last_error_message=message,
        runs=[ArchivedRun(attempt=n, worker_id="w" * 128, claimed_ms=2_000, finished_ms=4_000, outcome="failed",
                          error_type="E" * MAX_ERROR_MESSAGE, error_message=message) for n in range(1, runs + 1)],
        events=[ArchivedEvent(version=n, status="retry_wait", attempt=n, occurred_at="2026-12-04T00:00:00.000Z",
                              committed_at="2026-12-04T00:00:00.000Z", error_type="E" * 200)
                for n in range(1, events + 1)])


class FakeFirehose:
    """PutRecordBatch as Firehose answers it; `fail` says, per call, which positions of the request fail."""

    def __init__(self, fail: list[set[int]] | None = None) -> None:
        self.fail = list(fail or [])
        self.calls: list[list[bytes]] = []
        self.delivered: list[bytes] = []

    def put_record_batch(self, DeliveryStreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803
        assert DeliveryStreamName == "archive"
        data = [record["Data"] for record in Records]
        assert len(data) <= MAX_RECORDS_PER_REQUEST and sum(map(len, data)) <= MAX_BYTES_PER_REQUEST
        self.calls.append(data)
        failing = self.fail.pop(0) if self.fail else set()
        answers = []
        for position, item in enumerate(data):
            if position in failing:
                answers.append({"ErrorCode": "ServiceUnavailableException", "ErrorMessage": "slow down"})
            else:
                self.delivered.append(item)
                answers.append({"RecordId": str(position)})
        return {"FailedPutCount": len(failing & set(range(len(data)))), "Encrypted": True,
                "RequestResponses": answers}


def _sink(client: FakeFirehose, **kwargs: Any) -> FirehoseArchive:
    return FirehoseArchive(client, "archive", sleep=lambda _: None, **kwargs)


def test_records_go_as_json_lines_and_the_bytes_sent_are_returned() -> None:
    records = [_record("a"), _record("b")]
    client = FakeFirehose()
    written = _sink(client).write(records)
    assert [ArchivedJob(**json.loads(line)) for line in client.delivered] == records
    assert all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in client.delivered)
    assert written == sum(len(line) for line in client.delivered)
    assert _sink(client).write([]) == 0 and len(client.calls) == 1  # nothing to send: no request


def test_a_partial_failure_sends_again_exactly_the_entries_it_names() -> None:
    """Breaks if the whole batch were sent again (every accepted record archived twice on each retry) or if
    FailedPutCount were ignored (the failed records lost while their jobs expire)."""
    records = [_record(f"j{n}") for n in range(5)]
    client = FakeFirehose(fail=[{1, 3}, {0}])
    sink = _sink(client)
    sink.write(records)
    assert [len(call) for call in client.calls] == [5, 2, 1]
    assert client.calls[1] == [encode(records[1]), encode(records[3])]
    assert client.calls[2] == [encode(records[1])]
    assert sorted(client.delivered) == sorted(encode(record) for record in records)  # each exactly once
    assert sink.stats.retried_entries == 3 and sink.stats.records == 5


def test_records_still_refused_after_the_retries_raise_so_their_jobs_do_not_expire() -> None:
    """Breaks if the sink returned normally with records missing: the archiver would let the jobs expire."""
    client = FakeFirehose(fail=[{0}] * 10)
    with pytest.raises(ArchiveWriteFailed, match="ServiceUnavailableException"):
        _sink(client, max_retries=3).write([_record("a"), _record("b")])
    assert len(client.calls) == 4 and client.delivered == [encode(_record("b"))]


def test_batches_are_split_at_500_records_and_at_4_mib() -> None:
    """Breaks if a batch went past either limit: Firehose refuses the whole request."""
    many = [_record(f"j{n}") for n in range(1_201)]
    client = FakeFirehose()
    _sink(client).write(many)
    assert [len(call) for call in client.calls] == [500, 500, 201]
    assert b"".join(line for call in client.calls for line in call) == b"".join(map(encode, many))

    big = [b"x" * (900 * 1024)] * 10  # 4 of them fill a request (4 x 900 KiB <= 4 MiB < 5 x 900 KiB)
    assert [len(batch) for batch in batches(big)] == [4, 4, 2]
    assert all(sum(map(len, batch)) <= MAX_BYTES_PER_REQUEST for batch in batches(big))


def test_a_record_over_firehoses_limit_is_refused_before_anything_is_sent() -> None:
    client = FakeFirehose()
    oversized = _record("huge", runs=1, events=5_000)
    assert len(encode(oversized)) > MAX_RECORD_BYTES
    with pytest.raises(RecordTooLarge, match="job huge version 3"):
        _sink(client).write([_record("fine"), oversized])
    assert client.calls == []


def test_the_largest_record_a_job_makes_is_far_below_firehoses_limit() -> None:
    """Why RecordTooLarge does not happen in practice: 100 attempts (max_attempts' bound), each with a
    1,000-character error message of characters JSON escapes 6 bytes each, 4 KB of params of quotes, a 1 KB
    summary and 3 events per attempt fit in well under 1,000 KiB. Breaks if the record gains an unbounded
    field, or a bound grows, enough to reach the limit."""
    worst_message = "\x01" * MAX_ERROR_MESSAGE  # escaped as \\u0001: 6 bytes each
    record = _record("worst", runs=100, events=300, message=worst_message, params='"' * 4096,
                     summary="\x01" * 1024)
    assert len(encode(record)) < MAX_RECORD_BYTES * 0.9
