"""bench/tag_cost.py in a reduced mode (120 jobs arriving at 20 a second for 2 processes of 8 slots, untagged then
every job tagged env=prod): the tag's cost is visible per job and its index is spread over the tenant's 16 tag
shards, each taking about a 16th (a loose bound: 120 jobs over 16 shards is noisy; `python -m bench.tag_cost`
measures 1,000). Without the shard in the entry's partition key, one `by_tag` partition would take every entry
move of the tenant's jobs (about 2.3 write units per job: a ceiling near 430 jobs/s)."""

from __future__ import annotations

import pytest

from bench import scale, tag_cost

pytestmark = pytest.mark.integration


def test_a_tag_on_every_job_costs_a_few_write_units_spread_over_16_partitions() -> None:
    report = tag_cost.run(120, 1, size=scale.Realistic(jobs=120, rate_per_s=20, processes=2, slots=8))
    untagged, tagged = report["untagged"], report["tagged"]
    assert untagged["by_tag"]["partitions"] == 0 and "status.by_tag" not in untagged["status_table"]
    index = tagged["by_tag"]
    assert index["partitions"] == 16
    assert index["write_units_per_job"] == pytest.approx(tagged["status_table"]["status.by_listing"]
                                                         ["write_units_per_job"], rel=0.05)  # moves as the row's
    assert index["hottest_write_units_per_job"] < index["write_units_per_job"] / 4
    assert 2.0 <= report["write_units_per_tag_per_job"] <= 6.0
    assert report["usd_per_million_jobs_per_tag"] > 0
