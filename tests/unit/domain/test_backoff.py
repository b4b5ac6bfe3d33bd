"""Retry backoff bounds (onward/domain/backoff.py): without the cap a 30th retry would wait years; without the
floor, jittered retries could fire at once and hammer a struggling dependency."""

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onward.domain.backoff import BackoffPolicy


def test_ceiling_doubles_then_caps():
    policy = BackoffPolicy(base_s=1, cap_s=60)
    assert [policy.ceiling(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]


@given(attempt=st.integers(min_value=1, max_value=10_000), seed=st.integers())
def test_delay_is_between_half_the_ceiling_and_the_ceiling(attempt, seed):
    policy = BackoffPolicy(base_s=0.5, cap_s=300)
    delay = policy.delay(attempt, random.Random(seed))
    assert policy.ceiling(attempt) / 2 <= delay <= policy.ceiling(attempt) <= 300


def test_jitter_spreads_retries():
    policy = BackoffPolicy(base_s=1, cap_s=300)
    rng = random.Random(7)
    delays = {round(policy.delay(5, rng), 3) for _ in range(50)}
    assert len(delays) > 40


def test_attempt_numbers_start_at_one():
    with pytest.raises(ValueError, match="attempt numbers start at 1"):
        BackoffPolicy().ceiling(0)
