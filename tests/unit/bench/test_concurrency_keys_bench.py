"""The concurrency keys bench's logic (bench/concurrency_keys.py) on small figures: no key ever runs past its limit,
no worker slot idles while runnable work waits (a bulk job, or a keyed job whose key is free), the two tenants
share the starts about evenly while both have runnable work, and a claim's read and write units are the same with
few keys and many.

Without the key's condition in the claim's transaction a key would run both its jobs at once (most running 2);
without the end putting a held job back, the held jobs would never run (the bench would not end); a cost that
read more than the job's own key's item would grow with the keys."""

from __future__ import annotations

from bench.concurrency_keys import cost, mix


def test_workers_stay_busy_and_the_shares_hold_beside_many_keys() -> None:
    report = mix(keys=300, workers=16)
    assert report["most_running_of_one_key"] == 1
    assert report["ticks_with_an_idle_slot_while_runnable_work_waited"] == 0
    assert report["holds"] > 0  # (the scenario meets keys at their limit)
    assert abs(report["keyed_share_while_both_had_work"] - 0.5) <= 0.05


def test_a_claims_cost_is_flat_in_the_number_of_keys() -> None:
    few, many = cost(10), cost(300)
    assert few["claims"] == 20 and many["claims"] == 600
    assert few["holds"] == 10 and many["holds"] == 300  # each key's second job held once
    assert few["read_units_per_claim"] == many["read_units_per_claim"] == 2.0
    assert few["write_units_per_claim"] == many["write_units_per_claim"] == 11.0
