"""bench/fairness/ in a reduced mode (bulk backlog 4,000 instead of 2,000,000, the weights scenario 1
minute on Onward's side; same pool, tenants, loads and duration distribution), two processes. Only
ratios of simulated quantities are asserted, never wall-clock times.

What each target guards (Onward's side runs its real claim, onward.store.claims, on a pool of simulated
worker processes over the in-memory store: bench/fairness/claim_pool.py):
- utilisation >= 99% while work is due: without flex (DispatchOrder.flex), `bulk`'s cap of 80 would
  leave up to 20 workers idle whenever no small job is due (their claims find nothing and they poll);
- Jain >= 0.95 and shares within 5%: without virtual time divided by the weight (or with job counts
  instead of worker time: the three tenants' jobs differ in size 4:2:1), the 1:2:4 shares would be off;
- small tenants' p99 wait within 1.5x of the small-first oracle, and FIFO far behind: without fair share,
  they queue behind bulk's backlog; with the `active` head cached 250 ms whatever the claim rate (the head
  cache before onward.store.head_life), a newly active small tenant waited behind it: 2.4x with a backlog of 20,000.
The issue's "within 2x of the wait without bulk" is not asserted: without bulk an ideal pool's small
tenants wait 0 (idle workers), and even the oracle cannot match that while bulk keeps every worker busy
(asserted below, so the day that stops being true this test says so).

The small scenarios (full size, a second or so): each returning-tenant pattern gives the returning
tenant about half the pool with the system clock and nearly all of it without (clock 0.0 at every
decision: the hole the old floor had); aged bands bound a band-0 job's wait where strict priority never
starts one; serving the oldest due job across shards keeps their p99 waits level where shard-0-first does not.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench import fairness
from bench.fairness.claim_pool import IDLE_MAX_S
from onward.domain.dispatch import AGING_MS

REDUCED_BULK_JOBS = 4_000


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return fairness.run(REDUCED_BULK_JOBS, seed=7)


def test_onward_meets_the_targets(report):
    onward, oracle, targets = report["onward"], report["reference"], report["targets"]
    assert onward["utilisation"] >= fairness.TARGET_UTILISATION
    assert onward["jain_min"] >= fairness.TARGET_JAIN and onward["jain_windows"] >= 1
    assert onward["weight_share_error"] <= fairness.TARGET_SHARE_ERROR
    assert onward["small_p99_wait_s"] <= fairness.TARGET_SMALL_FIRST_RATIO * oracle["small_first_p99_wait_s"]
    assert report["small_p99_vs_small_first"] == targets["small_p99_vs_small_first"]["value"]
    assert targets["small_p99_vs_small_first"]["at_most"] == 1.5
    assert all(target["met"] for target in targets.values() if target.get("checked", True))


def test_fifo_starves_the_small_tenants(report):
    fifo, onward = report["fifo"], report["onward"]
    assert fifo["small_p50_wait_s"] > 100 * onward["small_p99_wait_s"]  # (FIFO: about half of bulk's 40 s)
    assert fifo["jain_min"] < 0.5 and fifo["weight_share_error"] > 0.5
    assert fifo["small_jobs"] == onward["small_jobs"] > 900  # the same jobs on both sides


def test_the_small_tenants_wait_about_one_completion_gap(report):
    """With 100 busy workers and 1 s mean jobs, one finishes every ~10 ms: the small tenants' p99 stays a
    small fraction of one mean job, while without bulk they wait for no worker (the ideal pool: 0; Onward's
    real workers: until an idle one polls, at most its idle delay)."""
    onward = report["onward"]
    mean_s = fairness.MEAN_DURATION_MS / 1000
    assert onward["small_p99_wait_s"] < 0.2 * mean_s
    assert report["fifo"]["small_p99_wait_without_bulk_s"] == 0.0
    assert onward["small_max_wait_without_bulk_s"] <= IDLE_MAX_S
    assert report["targets"]["small_p99_vs_without_bulk"]["met"] is False
    assert report["reference"]["small_first_p99_wait_s"] > 0.0  # the oracle cannot do it either


def test_the_json_report_has_the_agreed_shape(report):
    for policy in ("fifo", "onward"):
        for key in ("small_p50_wait_s", "small_p99_wait_s", "small_p99_wait_without_bulk_s", "utilisation",
                    "jain_min", "weight_share_error", "jobs", "wall_s"):
            assert key in report[policy], (policy, key)
    assert {"jobs", "wall_s", "low_band_max_wait_s", "shard_wait_p99_ratio", "scenarios"} <= set(report)
    names = [pattern.name for pattern in fairness.returning_patterns()]
    assert names == ["kept_one_long_job", "busy_has_running_none_waiting", "pool_idle_after_busy_hour",
                     "one_worker", "all_finish_together"]
    assert list(report["returning_tenant_share"]) == names
    for name in names:
        assert report["targets"][f"returning_tenant_share[{name}]"]["at_most"] == 0.6
    assert report["targets"]["shard_wait_p99_ratio"]["at_most"] == 1.5
    assert "low_band_max_wait_s" in report["targets"]


def test_the_simulation_is_deterministic():
    first = fairness.simulate(fairness.weights_scenario(seed=3, minutes=2), fairness.Policy.ONWARD)
    again = fairness.simulate(fairness.weights_scenario(seed=3, minutes=2), fairness.Policy.ONWARD)
    assert (first.jobs, first.worker_ms, first.jain) == (again.jobs, again.worker_ms, again.jain)


def test_the_real_claims_run_is_deterministic():
    """Each simulated worker process's store has its own seeded generator and the clock is simulated: the
    same seed claims the same jobs in the same order."""
    runs = [fairness.simulate_claims(fairness.weights_scenario(seed=3, minutes=2), max_ms=5_000) for _ in range(2)]
    assert runs[0].jobs == runs[1].jobs > 500
    assert runs[0].worker_ms == runs[1].worker_ms


# --- returning tenants ------------------------------------------------------------------------------------

def test_each_returning_pattern_is_as_named():
    """The state at the instant `back` returns (its events applied, before a worker is given out): the
    patterns must reproduce what let the old floor fail, or the shares below prove nothing."""
    outcomes = {pattern.name: (pattern, fairness.simulate_returning(pattern))
                for pattern in fairness.returning_patterns()}
    workers = fairness.RETURNING_WORKERS

    _, kept = outcomes["kept_one_long_job"]
    assert kept.running == {"back": 1, "busy": workers - 1} and kept.waiting["back"] > 0

    _, none_waiting = outcomes["busy_has_running_none_waiting"]
    assert none_waiting.running["busy"] == workers and none_waiting.waiting["busy"] == 0
    assert none_waiting.running["back"] == 0 and none_waiting.waiting["back"] > 0

    idle_pattern, idle = outcomes["pool_idle_after_busy_hour"]
    assert idle.running == {"back": 0, "busy": 0} and idle.ended == 0
    assert idle.waiting["back"] > 0 and idle.waiting["busy"] > 0
    first_hour = [batch for batch in idle_pattern.batches if batch.at_ms == 0.0]
    assert [(b.tenant_id, b.jobs * b.duration_ms / workers, b.pareto) for b in first_hour] == [
        ("busy", fairness.HOUR_MS, False)]  # busy's fixed jobs fill the pool for exactly an hour, then nothing
    assert idle_pattern.returns_at_ms - fairness.HOUR_MS == 10 * fairness.MINUTE_MS

    one_pattern, one = outcomes["one_worker"]
    assert one_pattern.workers == 1 and one.running["busy"] == 1 and one.waiting["back"] > 0

    _, together = outcomes["all_finish_together"]
    assert together.ended == workers and together.running == {"back": 0, "busy": 0}
    assert together.waiting["back"] > 0 and together.waiting["busy"] > 0


def test_a_returning_tenant_takes_about_half_with_the_clock_and_the_pool_without_it(report):
    """The system clock lifts `back` to where the pool is when it returns: its share of the hour after is
    about half (target <= 0.6). Without the clock (clock 0.0 at every decision, nobody lifted, as the old
    floor in these patterns) it takes nearly the whole pool: at least 0.95 of it, except when it kept one
    long job (1 worker-hour of 10 already used: it catches up in about 48 minutes, 0.9 of the hour)."""
    returning = report["scenarios"]["returning"]
    hole_at_least = {"kept_one_long_job": 0.85}
    for name, share in report["returning_tenant_share"].items():
        assert 0.4 <= share <= fairness.TARGET_RETURNING_SHARE, name
        assert returning["share_without_clock"][name] > hole_at_least.get(name, 0.95), name
        assert report["targets"][f"returning_tenant_share[{name}]"]["met"], name


# --- priority bands ---------------------------------------------------------------------------------------

def test_aging_bounds_the_low_band_wait_and_strict_priority_never_serves_it(report):
    """With band_order a band-0 job behind an endless band-9 stream runs once it has aged 9 bands past
    band 9's oldest job: about 90 s plus band 9's own wait, never before 90 s (band 9 does come first).
    Strict priority (the highest non-empty band) never starts one in the whole run."""
    aged, strict = report["scenarios"]["priority"]["aged"], report["scenarios"]["priority"]["strict"]
    aging_s = (fairness.HIGH_BAND - fairness.LOW_BAND) * AGING_MS / 1000
    assert report["low_band_max_wait_s"] == aged["low_band_max_wait_s"] <= fairness.TARGET_LOW_BAND_WAIT_S
    assert aged["low_band_max_wait_s"] <= aging_s + aged["high_band_max_wait_s"] + 10
    assert aged["low_band_p50_wait_s"] >= aging_s
    assert aged["low_band_jobs"] - aged["low_band_never_started"] >= 0.8 * aged["low_band_jobs"] > 20
    assert strict["low_band_never_started"] == strict["low_band_jobs"] == aged["low_band_jobs"]
    assert strict["low_band_max_wait_s"] > 0.9 * strict["simulated_min"] * 60


# --- shards -----------------------------------------------------------------------------------------------

def test_oldest_due_first_keeps_the_shards_level_and_shard0_first_does_not(report):
    """Serving the shard whose oldest due job is oldest (what the store's claim does: the highest aged
    priority over the heads of the tenant's ready queues) keeps the slowest shard's p99 wait within 1.05x
    of the fastest's. The old shard-0-first order serves shard 0 at once and leaves the last shard minutes
    behind: a ratio in the hundreds."""
    shards = report["scenarios"]["shards"]
    assert report["shard_wait_p99_ratio"] == shards["oldest_due_first"]["p99_ratio"] <= 1.05
    old = shards["shard0_first"]
    assert old["p99_ratio"] > 100
    assert old["p50_wait_s"][0] < 1.0 < 10.0 < old["p50_wait_s"][-1]


def test_no_order_but_shard0_first_favours_a_shard():
    """Oldest-due-first is level for every seed; a plain rotation favours no shard number either, but gives
    every backlogged shard the same service whatever its backlog, so its ratio moves with the draw (1.2 to
    2.2 over seeds 1-10): asserted only below 2.5. Shard-0-first is an order, not a draw: for every seed
    shard 0 is the fastest and the last shard the slowest, by far."""
    for seed in (1, 2, 3):
        assert fairness.simulate_shards(seed)["p99_ratio"] <= 1.05, seed
        assert fairness.simulate_shards(seed, fairness.ShardOrder.ROTATION)["p99_ratio"] < 2.5, seed
        old = fairness.simulate_shards(seed, fairness.ShardOrder.SHARD0_FIRST)["p99_wait_s"]
        assert old == sorted(old) and old[-1] > 100 * old[0], seed
