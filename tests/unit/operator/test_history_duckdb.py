"""The ready-made questions and the job lookup, on DuckDB over a generated Parquet archive."""

from __future__ import annotations

from pathlib import Path

import pytest

from onward.operator.history.questions import RETRIES, WAITS, day_window, over_jobs, slowest
from onward.operator.history.readers import ArchiveQueryError, DuckDbArchive
from onward.pipeline.archive.parquet import ParquetDirectory
from tests.unit.operator.archive_samples import DAY_MS, START_MS, job_id, record

pytestmark = pytest.mark.fast


@pytest.fixture
def archive(tmp_path: Path) -> DuckDbArchive:
    directory = ParquetDirectory(tmp_path)
    directory.write([
        record(job_id(1), version=2, attempts=1, ran_ms=1000),
        record(job_id(1), version=5, attempts=3, state="dead", ran_ms=1000),  # replayed, archived again
        record(job_id(2), attempts=1, waited_ms=5000, ran_ms=10_000),
        record(job_id(3), type_="demo.sleep", state="quarantined", attempts=2),
        record(job_id(4), tenant="other", waited_ms=9000),
    ])
    directory.write([record(job_id(5), created_ms=START_MS + DAY_MS)])  # the next day
    directory.write([record(job_id(1), version=5, attempts=3, state="dead", ran_ms=1000)])  # written twice
    return DuckDbArchive(tmp_path)


def test_a_job_is_its_newest_version_and_only_its_tenants(archive: DuckDbArchive) -> None:
    """Without LATEST_VERSIONS the lookup would answer version 2 (or two rows); without the tenant scope,
    another tenant could read the job by its id."""
    found = archive.job(job_id(1), "acme")
    assert found is not None and found.version == 5 and found.state == "dead"
    assert [run.attempt for run in found.runs] == [1, 2, 3]
    assert archive.job(job_id(1), "other") is None
    assert archive.job(job_id(4), "acme") is None
    assert archive.job(job_id(99), "acme") is None
    assert archive.job(job_id(1), "no*such'tenant") is None
    assert archive.job(job_id(4), None) is not None  # an operator bound to no tenant


def test_waits_per_tenant_and_type_over_a_window(archive: DuckDbArchive) -> None:
    """The window selects by `day`: job 5 (next day) stays out of the first day's figures."""
    table = archive.sql(WAITS.sql, day_window("2025-12-01", "2025-12-01"))
    rows = {(row["tenant"], row["type"]): row for row in table.records()}
    assert set(rows) == {("acme", "demo.echo"), ("acme", "demo.sleep"), ("other", "demo.echo")}
    echo = rows[("acme", "demo.echo")]
    assert echo["jobs"] == 2
    assert echo["wait_avg_ms"] == pytest.approx(3000)
    assert echo["wait_p95_ms"] >= echo["wait_p50_ms"]
    both = archive.sql(WAITS.sql, day_window("2025-12-01", "2025-12-02")).records()
    assert sum(row["jobs"] for row in both) == 5  # type: ignore[misc]


def test_retry_and_poison_rates_count_each_job_once(archive: DuckDbArchive) -> None:
    """Job 1 is archived three times (two versions, one twice): counted once, at its newest version."""
    rows = {row["type"]: row for row in archive.sql(RETRIES.sql, day_window("2025-12-01", "2025-12-02")).records()}
    echo = rows["demo.echo"]
    assert echo["jobs"] == 4
    assert echo["runs_per_job"] == pytest.approx((3 + 1 + 1 + 1) / 4)
    assert echo["dead_share"] == pytest.approx(0.25)
    assert rows["demo.sleep"]["quarantined_share"] == pytest.approx(1.0)


def test_the_slowest_jobs_of_a_day_come_first(archive: DuckDbArchive) -> None:
    table = archive.sql(slowest(2).sql, day_window("2025-12-01", "2025-12-01"))
    assert [row["job_id"] for row in table.records()] == [job_id(2), job_id(4)]
    with pytest.raises(ValueError, match="from 1 to 1000"):
        slowest(0)


def test_user_sql_reads_jobs_as_the_newest_versions(archive: DuckDbArchive) -> None:
    table = archive.user_sql("SELECT count(*) AS n, max(version) AS v FROM jobs WHERE job_id = '" + job_id(1) + "'")
    assert table.records() == [{"n": 1, "v": 5}]
    joined = archive.user_sql("WITH mine AS (SELECT * FROM jobs WHERE tenant = 'acme') SELECT count(*) FROM mine")
    assert joined.rows == [(4,)]


def test_bad_sql_is_the_engines_message(archive: DuckDbArchive) -> None:
    with pytest.raises(ArchiveQueryError, match="no_such_column"):
        archive.user_sql("SELECT no_such_column FROM jobs")


def test_an_empty_archive_says_so(tmp_path: Path) -> None:
    with pytest.raises(ArchiveQueryError, match="no files yet"):
        DuckDbArchive(tmp_path).user_sql("SELECT 1")


def test_windows_and_with_clauses_are_checked() -> None:
    with pytest.raises(ValueError, match="is after"):
        day_window("2025-12-02", "2025-12-01")
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        day_window("2025-12-01'; DROP", "2025-12-02")
    assert over_jobs("with x as (select 1) select * from x").startswith("WITH jobs AS (")


def test_a_lookup_within_days_sees_only_the_versions_that_finished_then(archive: DuckDbArchive) -> None:
    """Job 5 finished on 2025-12-02: a window ending the day before does not find it (the window reaches the
    SQL: on Athena it is what limits the partitions read)."""
    assert archive.job(job_id(5), "acme", ("2025-12-02", "2025-12-02")) is not None
    assert archive.job(job_id(5), "acme", ("2025-11-01", "2025-12-01")) is None


def test_the_docs_show_the_sql_that_runs() -> None:
    """docs/history.md shows each ready-made question's SQL: a change of the SQL without the docs fails here."""
    docs = (Path(__file__).resolve().parents[3] / "docs" / "history.md").read_text()
    for question in (WAITS, RETRIES, slowest(10)):
        assert question.sql.strip() in docs, question.name
