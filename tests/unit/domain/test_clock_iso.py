"""`iso` writes an epoch-millisecond stamp as ISO-8601 UTC to the millisecond, exactly (onward/domain/clock.py): the
second's text is kept between stamps of the same second, and must never be another second's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onward.domain import clock

pytestmark = pytest.mark.fast

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def exact(at: int) -> str:
    """The stamp by integer arithmetic (datetime's float path rounds beyond ~2500: 17946861448079 ms reads
    .078 there)."""
    return (EPOCH + timedelta(milliseconds=at)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@given(st.lists(st.integers(-10**12, 253402300799999 - 2000), min_size=1, max_size=20))
@settings(max_examples=300, deadline=None)
def test_every_stamp_reads_its_own_second_and_millisecond(stamps: list[int]) -> None:
    """Stamps in any order, the same second again and again or not: without the kept second's check a stamp
    would read the previous stamp's second."""
    for at in [*stamps, stamps[0] + 1, stamps[0] + 1000, stamps[0] - 1]:
        assert clock.iso(at) == exact(at)


def test_stamps_of_this_century_read_as_datetime_wrote_them() -> None:
    for at in (0, 999, 1000, 1_700_000_000_123, 4_102_444_799_999, -1, -1001):
        assert clock.iso(at) == clock._iso_by_datetime(at)


def test_a_float_stamp_takes_datetime_s_way() -> None:
    assert clock.iso(1_700_000_000_123.7) == clock._iso_by_datetime(1_700_000_000_123.7)  # type: ignore[arg-type]
