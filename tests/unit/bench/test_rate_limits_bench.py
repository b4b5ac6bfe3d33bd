"""The rate limits bench's logic (bench/rate_limits.py) on small figures: the burst is never over its GCRA
bound, runs within 5% of the limit, and no worker slot idles while unlimited work waits; a claim's read and
write units are the same with few keys and many (a claim reads and writes only its own keys' items).

Without the reservation the burst's claims would meet limited jobs without tokens again and again and the rate
would fall below the limit; without the per-key definition reads the cost would grow with the keys."""

from __future__ import annotations

from bench.rate_limits import burst, cost


def test_a_burst_is_never_over_and_within_five_percent_while_other_work_runs() -> None:
    report = burst(jobs=200, limit=20, period_s=1.0, workers=8)
    assert report["never_over"] and report["most_starts_in_a_period"] <= report["allowed_in_a_period"]
    assert 0.95 <= report["rate_vs_limit"] <= 1.0
    assert report["ticks_with_an_idle_slot_while_unlimited_work_waited"] == 0


def test_a_claims_cost_is_flat_in_the_number_of_keys() -> None:
    few, many = cost(10), cost(300)
    assert few["claims"] == 20 and many["claims"] == 600
    assert few["write_units_per_claim"] == many["write_units_per_claim"] == 4.0  # 2 a take, 6 a reservation
    assert abs(few["read_units_per_claim"] - many["read_units_per_claim"]) <= 0.1
