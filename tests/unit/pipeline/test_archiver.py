"""The archiver (onward.pipeline.archive.archiver) over the in-memory store, with a list sink: which events
archive what, read from the authority, written once per batch, and nothing read when archiving is off."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import pytest

from onward.domain.archive import ArchivedJob
from onward.domain.models import ErrorSummary, NewJob, OutboxEvent
from onward.entrypoints import archiver as archiver_entrypoint
from onward.faults import InjectedCrash, injected
from onward.pipeline.archive.archiver import Archiver, ArchiveTally
from onward.pipeline.archive.sinks import ListSink
from onward.store.service import JobStore
from onward_infra.lambda_context import LocalLambdaContext


def _data(event: OutboxEvent) -> bytes:
    return event.model_dump_json(by_alias=True).encode()


def _stream(store: JobStore, *job_ids: str) -> list[bytes]:
    """Every event of the jobs, as the events stream carries them (job by job, version order), stamped with
    `committed_at` as the relay stamps them."""
    return [_data(event.model_copy(update={"committed_at": event.occurred_at}))
            for job_id in job_ids for event in store.events(job_id)]


def _replayed(store: JobStore, *job_ids: str) -> list[bytes]:
    """The jobs' events as `onward replay` re-publishes them from the outbox: without `committed_at`."""
    return [_data(event.model_copy(update={"committed_at": None}))
            for job_id in job_ids for event in store.events(job_id)]


class _Clock:
    """Time that moves only when a test says (a retry is due once the test skips its backoff)."""

    def __init__(self) -> None:
        self.now = 1_800_000_000_000

    def __call__(self) -> int:
        return self.now


def _store() -> JobStore:
    return JobStore.in_memory(clock=_Clock())


def _run(store: JobStore, job_type: str = "demo.echo", *, fail: bool = False, max_attempts: int = 3) -> str:
    job_id = store.create("acme", NewJob(type=job_type, params={"n": 1}, max_attempts=max_attempts)).job.job_id
    clock = store._clock  # type: ignore[attr-defined]
    while True:
        clock.now += 3_600_000  # past any backoff
        lease = store.claim("w1", 30)
        assert lease is not None
        if fail:
            store.fail(lease, ErrorSummary(error_type="Boom", message="no"))
        else:
            store.complete(lease, {"ok": True})
        if store.get(job_id).state.value in ("succeeded", "dead"):
            return job_id


class _CountingStore:
    """A store wrapper counting reads (archiving off must read nothing)."""

    def __init__(self, store: JobStore) -> None:
        self._store = store
        self.reads = 0

    def __getattr__(self, name: str) -> Any:
        self.reads += 1
        return getattr(self._store, name)


def test_each_finished_job_is_archived_once_with_its_runs_result_and_events() -> None:
    """Breaks if non-final events archived too (a record per event), if a job's record missed its runs, or if a
    batch took more than one sink write."""
    store = _store()
    done, failed = _run(store), _run(store, fail=True, max_attempts=2)
    waiting = store.create("acme", NewJob(type="demo.echo")).job.job_id
    sink = ListSink()
    tally = Archiver(store, sink).archive_batch(_stream(store, done, failed, waiting))
    assert len(sink.batches) == 1 and tally.sink_writes == 1 and tally.archived == 2
    by_job = {record.job_id: record for record in sink.records}
    assert set(by_job) == {done, failed}
    assert by_job[done].state == "succeeded" and [r.attempt for r in by_job[done].runs] == [1]
    assert by_job[done].result_summary == json.dumps({"ok": True}, separators=(",", ":"))
    assert by_job[failed].state == "dead" and [r.attempt for r in by_job[failed].runs] == [1, 2]
    assert [e.version for e in by_job[done].events] == [e.version for e in store.events(done)]
    assert by_job[done].version == store.get(done).version and tally.bytes_written > 0


def test_a_job_replayed_since_its_final_event_is_skipped_and_archived_at_its_next_finish() -> None:
    """Breaks if the archiver archived the current (running or queued) row from an older final event: the
    archive would hold a job that is not finished."""
    store = _store()
    job_id = _run(store, fail=True, max_attempts=1)
    first_final = _stream(store, job_id)
    store.replay(job_id)
    sink = ListSink()
    archiver = Archiver(store, sink)
    tally = archiver.archive_batch(first_final)
    assert tally.skipped_replayed == 1 and sink.records == []
    store._clock.now += 1_000  # type: ignore[attr-defined]
    lease = store.claim("w1", 30)
    assert lease is not None
    store.complete(lease, "second")
    archiver.archive_batch(_stream(store, job_id))
    (record,) = sink.records
    assert record.state == "succeeded" and record.version == store.get(job_id).version
    assert len(record.runs) == 2  # the replayed attempt beside the first one


def test_a_job_gone_before_the_archiver_saw_it_is_counted_expired() -> None:
    """Breaks if a missing row raised (the batch would be redelivered for ever) or passed silently (the
    bound the docs state would go unmeasured)."""
    store = _store()
    job_id = _run(store)
    batch = _stream(store, job_id)
    store.recorder._state.rows.pop(job_id)  # type: ignore[attr-defined]  # what TTL does to the row
    sink = ListSink()
    tally = Archiver(store, sink).archive_batch(batch)
    assert tally.expired_before_archive == 1 and tally.expired_jobs == [job_id] and sink.batches == []


def test_a_replay_of_a_gone_jobs_events_is_no_new_miss() -> None:
    """`onward replay` of an old window re-publishes the final events of jobs archived and expired long ago:
    without telling replays apart, each would count (and warn, and alarm) as a job expired before it was
    archived."""
    store = _store()
    job_id = _run(store)
    store.recorder._state.rows.pop(job_id)  # type: ignore[attr-defined]
    sink = ListSink()
    tally = Archiver(store, sink).archive_batch(_replayed(store, job_id))
    assert tally.replayed_gone == 1 and tally.expired_before_archive == 0 and sink.batches == []


def test_archiving_off_reads_nothing_and_writes_nothing() -> None:
    """Breaks if a deployment without an archive read the authority for every finished job (cost for nothing)."""
    store = _store()
    job_id = _run(store)
    counting = _CountingStore(store)
    archiver = Archiver(counting, None)  # type: ignore[arg-type]
    assert not archiver.enabled
    tally = archiver.archive_batch(_stream(store, job_id))
    assert counting.reads == 0 and tally == ArchiveTally()


def test_a_crash_after_the_write_redelivers_and_the_rewrite_changes_nothing_in_effect() -> None:
    """A crash between the sink write and the acknowledgement: the batch comes again and is written again,
    the same job at the same version with the same content. Breaks if the record depended on the delivery (a
    reader taking the newest version would then see two different answers)."""
    store = _store()
    job_id = _run(store)
    batch = _stream(store, job_id)
    sink = ListSink()
    archiver = Archiver(store, sink)
    with injected("archiver.after_write"), pytest.raises(InjectedCrash):
        archiver.archive_batch(batch)
    archiver.archive_batch(batch)  # the redelivery
    first, again = sink.records
    assert first.key == again.key == (job_id, store.get(job_id).version)
    assert first.model_dump(exclude={"archived_ms"}) == again.model_dump(exclude={"archived_ms"})


def test_heartbeats_unreadable_records_and_non_final_events_archive_nothing() -> None:
    """Breaks if an unreadable record failed the batch: the archiver would stall behind what the projector
    parks."""
    store = _store()
    waiting = store.create("acme", NewJob(type="demo.echo")).job.job_id
    sink = ListSink()
    tally = Archiver(store, sink).archive_batch([b"not json", *_stream(store, waiting)])
    assert tally.unreadable == 1 and tally.final_events == 0 and sink.batches == []


def _kinesis_event(datas: list[bytes]) -> dict[str, Any]:
    """A Lambda Kinesis event carrying `datas`, sequence numbers 1.. on shard-0."""
    return {"Records": [{
        "eventID": f"shardId-000000000000:{n}", "eventSource": "aws:kinesis", "eventName": "aws:kinesis:record",
        "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/events", "awsRegion": "us-east-1",
        "eventVersion": "1.0", "invokeIdentityArn": "arn:aws:iam::123456789012:role/r",
        "kinesis": {"kinesisSchemaVersion": "1.0", "partitionKey": "p", "sequenceNumber": str(n),
                    "data": base64.b64encode(data).decode(), "approximateArrivalTimestamp": 1.0}}
        for n, data in enumerate(datas, start=1)]}


class _Deployment:
    def __init__(self, archiver: Archiver) -> None:
        self.archiver = archiver


def _handle(archiver: Archiver, datas: list[bytes], monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(archiver_entrypoint.Deployment, "from_environment", lambda: _Deployment(archiver))
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    return archiver_entrypoint.handler(_kinesis_event(datas), LocalLambdaContext("onward-archiver"))


def test_the_handler_with_no_archive_acknowledges_without_a_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Breaks if the function read the authority while archiving is off (neither ONWARD_ARCHIVE_DIR nor a
    delivery stream set), or held the batch back."""
    store = _store()
    job_id = _run(store)
    counting = _CountingStore(store)
    answer = _handle(Archiver(counting, None), _stream(store, job_id), monkeypatch)  # type: ignore[arg-type]
    assert answer == {"batchItemFailures": []} and counting.reads == 0


def test_the_handler_reports_a_failed_write_from_the_batchs_first_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """Breaks if a failed sink write acknowledged the batch (its jobs would never be archived) or reported only
    the records after the first (Lambda resumes at the lowest sequence number reported: the whole batch)."""

    class FailingSink:
        def write(self, records: Sequence[ArchivedJob]) -> int:
            raise OSError("disk full")

    store = _store()
    job_id = _run(store)
    answer = _handle(Archiver(store, FailingSink()), _stream(store, job_id), monkeypatch)
    assert answer == {"batchItemFailures": [{"itemIdentifier": "1"}]}
    sink = ListSink()
    assert _handle(Archiver(store, sink), _stream(store, job_id), monkeypatch) == {"batchItemFailures": []}
    assert [record.job_id for record in sink.records] == [job_id]
