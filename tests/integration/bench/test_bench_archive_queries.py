"""bench/archive_queries.py at a tiny size: the month it generates is what it says (jobs, versions, one file per
day and tenant), and every query it times answers (the lookups are checked against what was written inside the
bench, which raises otherwise). Counts only, never times."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import archive_queries

pytestmark = pytest.mark.integration


def test_a_tiny_month_is_generated_and_every_query_answers(tmp_path: Path) -> None:
    """Breaks if the generator wrote other than one file per (day, tenant) per daily write, lost a version,
    or if a query the bench reports stopped answering rows (a bad SQL change would raise)."""
    result = archive_queries.run(days=3, jobs_per_day=40, tenants=2, repeats=2, root=tmp_path)
    assert result["jobs"] == 3 * 40
    assert result["versions"] >= result["jobs"]
    assert result["files"] == 3 * 2  # one write per day, one file per tenant of it (40 jobs cover both)
    assert result["bytes"] == sum(path.stat().st_size for path in tmp_path.rglob("*.parquet"))
    names = [timing["query"] for timing in result["queries"]]
    assert len(names) == 5 and all(timing["rows"] > 0 for timing in result["queries"])


def test_a_replayed_job_is_looked_up_at_its_newest_version(tmp_path: Path) -> None:
    """The generator archives some dead jobs twice; the bench's lookups must find the newer one (measure()
    raises AssertionError otherwise), here for every job of the archive."""
    written = archive_queries.generate(tmp_path, days=2, jobs_per_day=60, tenants=3)
    assert written.versions > written.jobs  # some were archived twice
    reader = archive_queries.DuckDbArchive(tmp_path)
    for job_id, (tenant, version) in written.newest.items():
        if version > 1:
            found = reader.job(job_id, tenant)
            assert found is not None and found.version == version
