"""bench/scale.py in a reduced mode (60 tenants, 150 one-tenant jobs, claims measured with 10 and 400
registered tenants): every unit lands on a partition of the jobs or outbox table, no key takes a share of
the units that grows with the platform (the old layout wrote 8 units per job to the `TENANTS` partition
and read every tenant's counters on each claim), and a claim reads the same whatever the tenants. The
ceilings are asserted loosely (a small run's hottest of 32 or 64 shards is noisier than the full run's:
`python -m bench.scale --json` measures 1,000 tenants and 3,000 jobs)."""

from __future__ import annotations

import pytest

from bench import scale

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def report() -> dict:
    return scale.run(60, 150, registered=(10, 400), backlogged=(10, 60))


def test_no_partition_takes_a_share_of_every_tenants_jobs(report):
    """Many tenants: the hottest key takes a fraction of a unit per job, not the 8 write units per job the
    `TENANTS` partition took (its counters), and it is not the registry, which claims no longer read."""
    many = report["many_tenants"]
    assert many["hottest_key_write_units_per_job"] < 0.5, many
    assert many["hottest_key_read_units_per_job"] < 1.0, many
    assert "|TENANTS" not in many["hottest_write_key"] and "|TENANTS" not in many["hottest_read_key"]
    assert many["write_units_per_job"] <= 40


def test_one_tenants_hot_items_are_sharded(report):
    """One tenant with 8 ready shards: its RUNNING counters and queue entries share its jobs, so the
    hottest key takes about 4 / 8 write units per job where one RUNNING item took 4 (250 jobs/s)."""
    one = report["one_tenant"]
    assert one["hottest_key_write_units_per_job"] <= 1.0, one
    assert one["aws_ceiling_jobs_per_s"] >= 1_000, one


def test_a_claim_reads_the_same_whatever_the_tenants(report):
    """Read units of a claim with cold caches: flat from 10 to 400 registered tenants and from 10 to 60
    backlogged ones (the old claim read every registered tenant's settings and counters)."""
    registered, backlogged = report["claim_read_units"], report["claim_read_units_backlogged"]
    assert max(registered.values()) <= 1.5 * min(registered.values()), registered
    assert max(backlogged.values()) <= 1.5 * min(backlogged.values()), backlogged
    assert set(report["targets"]) >= {"many_tenants_ceiling", "one_tenant_ceiling", "claim_read_units_flat"}
