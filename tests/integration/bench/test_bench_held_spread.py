"""bench/held_spread.py in a reduced mode (200 jobs of one paused type over 20 tenants, held then resumed, in one
partition as before the shards, then spread over them), with the embedded endpoint's meter: the held entries'
write units (2 per hold, 2 per release) fall over the shards, the hottest taking a small share (a loose bound: 200
jobs over 32 shards is noisy; `python -m bench.held_spread` measures 640). Without the shard in the entry's
partition key, one partition takes every hold of the type: a ceiling of 500 holds a second."""

from __future__ import annotations

import pytest

from bench import held_spread
from onward.store.ports.index_shards import HELD_SHARDS

pytestmark = pytest.mark.integration


def test_a_paused_types_holds_spread_their_write_units_over_the_shards() -> None:
    report = held_spread.run(200, 20)
    before, after = report["one_partition"], report["sharded"]
    assert before["holds"] == {"units_per_job": 2.0, "partitions": 1, "hottest_share": 1.0,
                               "ceiling_jobs_per_s": 500}
    for step in ("holds", "releases"):
        assert after[step]["units_per_job"] == 2.0  # (the shards cost nothing more per job)
        assert after[step]["partitions"] > HELD_SHARDS * 3 // 4
        assert after[step]["hottest_share"] < 3 / HELD_SHARDS
    assert report["ceiling_ratio"] > 10
    assert after["sweep_queries"] <= HELD_SHARDS + 4  # (a page per shard, the unsharded key, the switches)
