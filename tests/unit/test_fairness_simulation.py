"""bench/fairness.py in a reduced mode (bulk backlog 20,000 instead of 2,000,000; same pool, tenants,
loads and duration distribution), one process. Only ratios of simulated quantities are asserted, never
wall-clock times.

What each target guards (all run onward.dispatch.dispatch_order, the claim path's own function):
- utilisation >= 99% while work is due: without flex (DispatchOrder.flex), `bulk`'s cap of 80 would
  leave up to 20 workers idle whenever no small job is due (the simulation stops dispatching: first()
  finds no candidate);
- Jain >= 0.95 and shares within 5%: without virtual time divided by the weight (or with job counts
  instead of worker time: the three tenants' jobs differ in size 4:2:1), the 1:2:4 shares would be off;
- small tenants' p99 wait within 2x of the small-first oracle, and FIFO far behind: without fair share,
  they queue behind bulk's backlog.
The issue's "within 2x of the wait without bulk" is not asserted: without bulk the small tenants wait 0
(idle workers), and even the oracle cannot match that while bulk keeps every worker busy (asserted below,
so the day that stops being true this test says so).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "fairness.py"
REDUCED_BULK_JOBS = 20_000


def _load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_fairness", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return _load_bench()


@pytest.fixture(scope="module")
def report(bench: ModuleType) -> dict[str, Any]:
    return bench.run(REDUCED_BULK_JOBS, seed=7, serial=True)


def test_onward_meets_the_targets(report, bench):
    onward, oracle, targets = report["onward"], report["reference"], report["targets"]
    assert onward["utilisation"] >= bench.TARGET_UTILISATION
    assert onward["jain_min"] >= bench.TARGET_JAIN and onward["jain_windows"] >= 5
    assert onward["weight_share_error"] <= bench.TARGET_SHARE_ERROR
    assert onward["small_p99_wait_s"] <= bench.TARGET_WAIT_RATIO * oracle["small_first_p99_wait_s"]
    assert all(target["met"] for target in targets.values() if target.get("checked", True))


def test_fifo_starves_the_small_tenants(report):
    fifo, onward = report["fifo"], report["onward"]
    assert fifo["small_p50_wait_s"] > 1000 * onward["small_p99_wait_s"]
    assert fifo["jain_min"] < 0.5 and fifo["weight_share_error"] > 0.5
    assert fifo["small_jobs"] == onward["small_jobs"] > 1000  # the same jobs on both sides


def test_the_small_tenants_wait_about_one_completion_gap(report, bench):
    """With 100 busy workers and 1 s mean jobs, one finishes every ~10 ms: the small tenants' p99 stays a
    small fraction of one mean job, while without bulk they never wait."""
    onward = report["onward"]
    mean_s = bench.MEAN_DURATION_MS / 1000
    assert onward["small_p99_wait_s"] < 0.2 * mean_s
    assert onward["small_p99_wait_without_bulk_s"] == 0.0
    assert report["targets"]["small_p99_vs_without_bulk"]["met"] is False
    assert report["reference"]["small_first_p99_wait_s"] > 0.0  # the oracle cannot do it either


def test_the_json_report_has_the_agreed_shape(report):
    for policy in ("fifo", "onward"):
        for key in ("small_p50_wait_s", "small_p99_wait_s", "small_p99_wait_without_bulk_s", "utilisation",
                    "jain_min", "weight_share_error", "jobs", "wall_s"):
            assert key in report[policy], (policy, key)
    assert {"jobs", "wall_s"} <= set(report)


def test_the_simulation_is_deterministic(bench):
    first = bench.simulate(bench.weights_scenario(seed=3, minutes=2), bench.Policy.ONWARD)
    again = bench.simulate(bench.weights_scenario(seed=3, minutes=2), bench.Policy.ONWARD)
    assert (first.jobs, first.worker_ms, first.jain) == (again.jobs, again.worker_ms, again.jain)
