"""The archive as Parquet files in a directory (onward.pipeline.archive.parquet)."""

import os
import time
from pathlib import Path

import duckdb

from onward.domain.archive import ArchivedEvent, ArchivedJob, ArchivedRun
from onward.pipeline.archive.parquet import INCOMING, STALE_INCOMING_S, ParquetDirectory, record_of


def _record(job_id: str, tenant: str, version: int = 3) -> ArchivedJob:
    return ArchivedJob(job_id=job_id, tenant=tenant, type="t", state="succeeded", version=version, attempts=1,
                       max_attempts=3, priority=0, created_ms=1_000, finished_ms=5_000, waited_ms=10, ran_ms=20,
                       params_json="{}", archived_ms=9, day="2026-12-04",
                       runs=[ArchivedRun(attempt=1, worker_id="w", claimed_ms=2_000, finished_ms=4_000,
                                         outcome="succeeded", overlapped_with=[2])],
                       events=[ArchivedEvent(version=1, status="queued", attempt=0, occurred_at="x")])


def _read(directory: ParquetDirectory, tenant: str = "*") -> list[ArchivedJob]:
    relation = duckdb.sql(f"SELECT * FROM {directory.source(tenant=tenant)}")
    return [record_of(dict(zip(relation.columns, row, strict=True))) for row in relation.fetchall()]


def test_records_come_back_whole_one_file_per_day_and_tenant(tmp_path: Path) -> None:
    directory = ParquetDirectory(tmp_path)
    records = [_record("a", "acme"), _record("b", "beta"), _record("c", "acme")]
    assert directory.write(records) > 0
    assert sorted(_read(directory), key=lambda r: r.job_id) == records
    assert [r.job_id for r in _read(directory, "beta")] == ["b"]
    assert len(list((tmp_path / "jobs").rglob("*.parquet"))) == 2
    assert not list((tmp_path / INCOMING).iterdir())  # nothing left half-way


def test_a_crashed_write_leaves_nothing_a_reader_sees_and_a_later_write_clears_it(tmp_path: Path) -> None:
    """Breaks if files were written in place: a half-written Parquet file under jobs/ fails every reader."""
    (tmp_path / INCOMING / "dead").mkdir(parents=True)
    (tmp_path / INCOMING / "dead" / "part-x.parquet").write_bytes(b"PAR1 half")
    stale = time.time() - STALE_INCOMING_S - 1
    os.utime(tmp_path / INCOMING / "dead", (stale, stale))
    directory = ParquetDirectory(tmp_path)
    assert not directory.has_files()
    directory.write([_record("a", "acme")])
    assert [r.job_id for r in _read(directory)] == ["a"] and not (tmp_path / INCOMING / "dead").exists()


def test_a_write_leaves_another_writes_batch_in_flight_alone(tmp_path: Path) -> None:
    """Two shards' batches are written at once (the local archiver's poller reads shards concurrently).
    Breaks if a write cleared every batch under .incoming/: the other write's COPY fails, its batch is
    delivered again and again."""
    (tmp_path / INCOMING / "in-flight").mkdir(parents=True)
    ParquetDirectory(tmp_path).write([_record("a", "acme")])
    assert (tmp_path / INCOMING / "in-flight").is_dir()


def test_writing_nothing_writes_no_file(tmp_path: Path) -> None:
    assert ParquetDirectory(tmp_path).write([]) == 0 and not (tmp_path / "jobs").exists()
