"""Fair dispatch at scale: Onward's real claim on simulated worker processes against one global FIFO and a
small-first oracle; the scenarios and the report with its targets (`python -m bench.fairness` prints it)."""

from bench.fairness.claim_pool import simulate_claims
from bench.fairness.report import (
    TARGET_JAIN,
    TARGET_SHARE_ERROR,
    TARGET_SMALL_FIRST_RATIO,
    TARGET_UTILISATION,
    TARGET_WAIT_RATIO,
    render_table,
    run,
)
from bench.fairness.scenarios import (
    HIGH_BAND,
    HOUR_MS,
    LOW_BAND,
    MINUTE_MS,
    RETURNING_WORKERS,
    TARGET_LOW_BAND_WAIT_S,
    TARGET_RETURNING_SHARE,
    TARGET_SHARD_RATIO,
    ShardOrder,
    returning_patterns,
    simulate_returning,
    simulate_shards,
    weights_scenario,
)
from bench.fairness.simulator import MEAN_DURATION_MS, Policy, percentile, simulate

__all__ = [
    "HIGH_BAND",
    "HOUR_MS",
    "LOW_BAND",
    "MEAN_DURATION_MS",
    "MINUTE_MS",
    "RETURNING_WORKERS",
    "TARGET_JAIN",
    "TARGET_LOW_BAND_WAIT_S",
    "TARGET_RETURNING_SHARE",
    "TARGET_SHARD_RATIO",
    "TARGET_SHARE_ERROR",
    "TARGET_SMALL_FIRST_RATIO",
    "TARGET_UTILISATION",
    "TARGET_WAIT_RATIO",
    "Policy",
    "ShardOrder",
    "percentile",
    "render_table",
    "returning_patterns",
    "run",
    "simulate",
    "simulate_claims",
    "simulate_returning",
    "simulate_shards",
    "weights_scenario",
]
