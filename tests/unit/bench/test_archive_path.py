"""bench/archive_path.py's measuring sink: it writes through the ParquetDirectory it wraps, counts one write
per call, and bills each record's Firehose JSON rounded up to 5 KB, record by record (not the batch's sum)."""

from __future__ import annotations

import random
from pathlib import Path

from bench import archive_cost
from bench.archive_path import MeasuredSink, plan_outcomes
from onward.pipeline.archive.firehose import encode
from onward.pipeline.archive.parquet import ParquetDirectory


def test_each_record_is_billed_rounded_up_to_5_kb_and_each_call_is_one_write(tmp_path: Path) -> None:
    """Breaks if the billed bytes were rounded over the batch (3 small records would bill 5 KB, not 15) or
    not rounded at all, if a record just over 5 KB billed less than 10 KB, or if the Parquet bytes were not
    the files the directory wrote."""
    small = archive_cost.sample_records(3)
    large = small[0].model_copy(update={"job_id": "f" * 32, "result_summary": "x" * 5200})
    sink = MeasuredSink(ParquetDirectory(tmp_path))
    written = sink.write(small) + sink.write([large])
    assert sink.writes == 2 and sink.records == 4
    assert all(len(encode(record)) < 5120 for record in small) and 5120 < len(encode(large)) <= 10240
    assert sink.firehose_billed_bytes == 3 * 5120 + 10240
    assert sink.firehose_json_bytes == sum(len(encode(record)) for record in [*small, large])
    assert sink.parquet_bytes == written == sum(path.stat().st_size for path in tmp_path.rglob("*.parquet"))


def test_the_plans_end_every_job_and_cover_the_three_paths() -> None:
    """Breaks if a plan left a job unfinished (a failure as the last outcome with attempts to spare would leave
    it waiting for a retry that never comes, and it would never expire)."""
    rng = random.Random(36)
    plans = [plan_outcomes(rng) for _ in range(500)]
    for max_attempts, outcomes in plans:
        assert len(outcomes) <= max_attempts
        assert outcomes[-1] == "ok" or len(outcomes) == max_attempts  # succeeded, or out of attempts: dead
    assert {tuple(outcomes) for _, outcomes in plans} == {("ok",), ("fail", "ok"), ("fail", "fail")}
