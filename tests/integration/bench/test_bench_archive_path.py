"""bench/archive_path.py at a tiny size: jobs run to their end on a scaled endpoint, the archiver archives them,
TTL deletes them, and every expired job is in the archive at its final version with one run per attempt. Counts
only, never times."""

from __future__ import annotations

import pytest

from bench import archive_path

pytestmark = pytest.mark.integration


def test_every_expired_job_is_archived_with_two_reads_each_and_a_write_at_most_per_batch() -> None:
    """Breaks if a job expired before the archiver wrote it or was archived at another version or without a run
    (missing > 0), if the archiver read a job in more than its two Queries (the jobs table's partition, the
    outbox) or read jobs it does not archive, or if it wrote more than once per batch (a write per job or per
    tenant would show as more sink writes than batches)."""
    result = archive_path.run(jobs=30, tenants=3, retention_s=4.0, expiry_timeout_s=30.0)
    assert result["not_expired"] == 0 and result["expired"] == 30
    assert result["missing"] == 0 and result["archived"] == 30
    assert result["archiver"]["archived"] == 30 and result["archiver"]["expired_before_archive"] == 0
    reads = result["archiver_requests"]
    assert reads == {"Query jobs": 30, "Query outbox": 30}  # exactly 2 read requests per archived job
    assert result["read_requests_per_archived_job"] == 2.0
    assert 1 <= result["sink_writes"] <= result["batches"]
    assert result["firehose_billed_bytes_per_job"] >= result["firehose_json_bytes_per_job"] > 0
    assert result["firehose_billed_bytes_per_job"] % archive_path.FIREHOSE_INCREMENT_BYTES == 0
