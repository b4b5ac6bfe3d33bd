"""GCRA as onward.domain.rate_limits computes it: a burst of `limit` from an idle bucket, then one token per
interval; a job with no token now reserves the earliest moment every one of its buckets conforms; the names a
limit may have; the window bound the docs state.

Without `earliest_us` honouring the tolerance a reservation would come an interval late per token (the rate
would fall short); without max() over the buckets a job under two limits would start on one's token while the
other had none."""

from __future__ import annotations

import pytest

from onward.domain.rate_limits import (
    RESERVATION_GRACE_MS,
    Gcra,
    applicable_keys,
    grace_ms,
    key_problem,
    max_starts,
    reservation_fresh,
    token,
)

NOW = 1_800_000_000_000


def test_an_idle_bucket_lets_a_burst_of_limit_then_one_per_interval() -> None:
    gcra = Gcra(4, 1.0)
    tats: dict[str, int | None] = {}
    moments = []
    for _ in range(7):
        chosen = token({"k": gcra}, tats, NOW)
        moments.append(chosen.at_ms - NOW)
        tats = {"k": chosen.moves[0].tat}
    assert moments == [0, 0, 0, 0, 250, 500, 750]
    assert gcra.interval_us == 250_000 and gcra.tolerance_us == 750_000


def test_a_job_under_two_limits_waits_for_the_later_token_and_moves_both() -> None:
    limits = {"k": Gcra(1, 1.0), "tenant": Gcra(1, 4.0)}
    chosen = token(limits, {"k": NOW * 1000 + 200_000, "tenant": NOW * 1000 + 3_000_000}, NOW)
    assert chosen.reserved and chosen.at_ms == NOW + 3000
    assert {move.key: move.tat for move in chosen.moves} == {"k": (NOW + 4000) * 1000, "tenant": (NOW + 7000) * 1000}
    assert {move.key: move.expected for move in chosen.moves} == {"k": NOW * 1000 + 200_000,
                                                                 "tenant": NOW * 1000 + 3_000_000}


def test_names_and_validation() -> None:
    assert applicable_keys("email.send", "customer-42") == ("customer-42", "type:email.send", "tenant")
    assert applicable_keys("email.send", None) == ("type:email.send", "tenant")
    assert key_problem("tenant") is None and key_problem("type:email.send") is None and key_problem("a:b@c") is None
    assert key_problem("type:Email") and key_problem("a/b") and key_problem("") and key_problem("x" * 129)
    for limit, period in ((0, 1.0), (True, 1.0), (1, 0.0), (1, float("inf")), (1.5, 1.0)):
        with pytest.raises(ValueError, match=r"^(limit|period_s) must be"):
            Gcra(limit, period)  # type: ignore[arg-type]


def test_grace_and_the_window_bound() -> None:
    assert grace_ms([Gcra(10, 1.0)]) == RESERVATION_GRACE_MS and grace_ms([Gcra(1, 60.0)]) == 60_000
    assert reservation_fresh(NOW, NOW + RESERVATION_GRACE_MS, RESERVATION_GRACE_MS)
    assert not reservation_fresh(NOW, NOW + RESERVATION_GRACE_MS + 1, RESERVATION_GRACE_MS)
    assert not reservation_fresh(None, NOW, RESERVATION_GRACE_MS)
    assert max_starts(Gcra(10, 1.0), 999) == 19 and max_starts(Gcra(10, 1.0), 1000) == 20
    assert max_starts(Gcra(10, 1.0), 0, grace=2000) == 30
