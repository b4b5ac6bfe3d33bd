"""bench/memory.py for a fraction of a minute with a tiny retention (24 h -> 8.6 s): the endpoint and the
platform each in a process of their own, jobs at a constant rate. Checks the JSON's shape and that items and
records are really being deleted and trimmed; growth is not asserted here (a 30-second run on a shared
machine says nothing about it: `python -m bench.memory --json` measures it over 30 minutes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def test_the_memory_bench_prints_rss_by_minute_and_the_endpoint_deletes_and_trims():
    """Without the endpoint's retention the counts of deleted and trimmed would be zero and the held stream
    and Kinesis records would grow with every job; without `--retention-scale` on `onward endpoint` the
    bench could not shorten retention; without the JSON's keys the 30-minute run could not be read."""
    done = subprocess.run([sys.executable, "-m", "bench.memory", "--json", "--minutes", "0.4", "--rate", "2",
                           "--retention-scale", "0.0001"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    minutes = ["0.1333", "0.2667", "0.4"]
    for process in ("endpoint", "platform"):
        assert list(result["rss_mb"][process]) == minutes
        assert all(mb > 10 for mb in result["rss_mb"][process].values())
        assert isinstance(result["growth_pct"][process], float)
        assert process in result["rss_mb_per_1000_jobs_retained"]
    assert list(result["jobs_submitted"].values()) == sorted(result["jobs_submitted"].values())
    assert result["jobs_submitted"]["0.4"] >= 40
    assert result["retention_s"]["dynamodb_stream"] == pytest.approx(8.64)
    assert isinstance(result["within_target"], bool) and result["target_growth_pct"] == 10.0
    trimmed = result["retention"]
    assert trimmed["ttl_deleted"] >= 16  # heartbeats (1 h TTL: 0.36 s here)
    assert trimmed["dynamodb_stream_records_trimmed"] > 0 and trimmed["kinesis_records_trimmed"] > 0
    # 24 h is 8.6 s: whatever the rate, the streams hold about 9 s of records, not the whole run
    held = result["held"]["0.4"]
    assert held["dynamodb_stream_records"] < trimmed["dynamodb_stream_records_trimmed"] + 200
    # the jobs' TTL (7 days here: 60 s) has not passed in 24 s: every job is still held, and the view shows
    # each one of the last minute (all of them) as succeeded
    assert result["retention_s"]["job_ttl"] == pytest.approx(60.48)
    assert result["jobs_retained"] == result["jobs_submitted"]["0.4"]
    assert result["last_minute_jobs_visible_succeeded"] == result["last_minute_jobs"] == result["jobs_submitted"]["0.4"]
