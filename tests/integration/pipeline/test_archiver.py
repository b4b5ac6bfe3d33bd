"""The archiver on the embedded endpoint (onward.pipeline.archive.archiver through its Lambda handler and the
local poller): jobs finish, the local pipeline drains, and the Parquet files under ONWARD_ARCHIVE_DIR hold each
finished job with all its runs, read back with DuckDB; a replayed job is archived at both finishes and the
newest-version SQL answers its last; a crash between the write and the acknowledgement rewrites, in effect,
nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from onward.bootstrap import Deployment
from onward.domain.archive import LATEST_VERSIONS
from onward.domain.models import ErrorSummary, NewJob
from onward.faults import InjectedCrash, injected
from onward.pipeline.archive.parquet import ParquetDirectory, record_of
from onward.store.service import JobStore
from onward_infra.pipeline import LocalPipeline

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]

CLIENTS = ("dynamodb", "dynamodbstreams", "kinesis")


@pytest.fixture
def archive(tmp_path: Path, stack_environment: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> ParquetDirectory:
    monkeypatch.setenv("ONWARD_ARCHIVE_DIR", str(tmp_path / "archive"))  # the handler's Deployment reads it
    return ParquetDirectory(tmp_path / "archive")


def _pipeline(settings: Any, endpoint: Any, archive: ParquetDirectory) -> LocalPipeline:
    """A pipeline as after a restart (positions from the checkpoint table), the archiver's poller included."""
    clients = {name: endpoint.client(name) for name in CLIENTS}
    return LocalPipeline.of(Deployment(settings, clients=clients, environ={"ONWARD_ARCHIVE_DIR": str(archive.root)}))


def _finish(store: JobStore, clock: Any, job_id: str, outcomes: list[str]) -> None:
    """Claim the job once per outcome ("fail": a retryable failure, "ok": success), the clock past backoff."""
    for outcome in outcomes:
        clock.advance(3600)
        lease = store.claim("w1", 30)
        assert lease is not None and lease.job_id == job_id
        if outcome == "ok":
            store.complete(lease, {"job": job_id})
        else:
            store.fail(lease, ErrorSummary(error_type="Boom", message="try again"))


def _rows(sql: str) -> list[dict[str, Any]]:
    relation = duckdb.sql(sql)
    return [dict(zip(relation.columns, row, strict=True)) for row in relation.fetchall()]


def _latest(archive: ParquetDirectory) -> dict[str, Any]:
    return {row["job_id"]: record_of(row) for row in _rows(LATEST_VERSIONS.format(source=archive.source()))}


def test_finished_jobs_are_in_the_parquet_files_with_all_their_runs_and_a_replay_adds_its_newest_version(
        store: JobStore, clock: Any, settings: Any, endpoint: Any, archive: ParquetDirectory) -> None:
    """Breaks if the archiver were not fed by the pipeline (no files), if a record missed a run (the retried
    job has two), or if a replay's second finish were not archived (LATEST_VERSIONS would answer the first)."""
    retried = store.create("acme", NewJob(type="demo.echo", max_attempts=3)).job.job_id
    _finish(store, clock, retried, ["fail", "ok"])
    dead = store.create("acme", NewJob(type="demo.echo", max_attempts=1)).job.job_id
    _finish(store, clock, dead, ["fail"])
    waiting = store.create("beta", NewJob(type="demo.echo", run_at=None)).job.job_id
    store.cancel(waiting)
    _pipeline(settings, endpoint, archive).drain()

    latest = _latest(archive)
    assert {retried, dead, waiting} <= set(latest)
    assert [run.attempt for run in latest[retried].runs] == [1, 2] and latest[retried].state == "succeeded"
    assert latest[retried].runs[0].error_type == "Boom" and latest[retried].version == store.get(retried).version
    assert latest[dead].state == "dead" and latest[waiting].state == "cancelled" and latest[waiting].runs == []
    assert [e.version for e in latest[retried].events] == [e.version for e in store.events(retried)]

    store.replay(dead)
    _finish(store, clock, dead, ["ok"])
    _pipeline(settings, endpoint, archive).drain()
    versions = [row["version"] for row in _rows(f"SELECT version FROM {archive.source()} WHERE job_id = '{dead}'")]
    assert sorted(set(versions)) == [latest[dead].version, store.get(dead).version]  # archived at both finishes
    newest = _latest(archive)[dead]
    assert newest.state == "succeeded" and newest.version == store.get(dead).version and len(newest.runs) == 2


def test_a_crash_after_the_archive_write_redelivers_and_changes_nothing_in_effect(
        store: JobStore, clock: Any, settings: Any, endpoint: Any, archive: ParquetDirectory) -> None:
    """The archiver dies between its sink write and the acknowledgement: the restarted pipeline delivers the
    batch again and it is written again. Breaks if the batch were acknowledged before the write (the crash would
    lose it: a crash before the write shows the same) or if the rewrite differed from the first write."""
    job_id = store.create("acme", NewJob(type="demo.echo")).job.job_id
    _finish(store, clock, job_id, ["ok"])
    with injected("archiver.after_write"), pytest.raises(InjectedCrash):
        _pipeline(settings, endpoint, archive).drain()
    first = _latest(archive)[job_id]
    _pipeline(settings, endpoint, archive).drain()  # restarted: from the archiver's stored position
    copies = _rows(f"SELECT * FROM {archive.source()} WHERE job_id = '{job_id}'")
    assert len(copies) == 2  # written twice ...
    again = _latest(archive)[job_id]
    assert again.model_dump(exclude={"archived_ms"}) == first.model_dump(exclude={"archived_ms"})  # ... once in effect
