"""A tenant's due jobs split by type from its bands' heads (onward.maintenance.backlog_types.by_type): exact
when a head holds the whole band, in proportion otherwise, the top types then `other`, summing to the due count."""

from __future__ import annotations

import pytest

from onward.maintenance.backlog_types import OTHER, DueHead, by_type

pytestmark = pytest.mark.fast

NOW = 1_000_000


def test_a_band_read_whole_is_counted_exactly_with_each_types_oldest_wait() -> None:
    """Catches an age taken from a type's newest job rather than its earliest due one."""
    split = by_type([DueHead(3, [("a", NOW - 9000), ("b", NOW - 4000), ("a", NOW - 1000)])], NOW)
    assert {name: (d.due, d.oldest_due_age_s) for name, d in split.items()} == {"a": (2, 9.0), "b": (1, 4.0)}


def test_a_long_band_is_split_in_its_heads_proportions_and_sums_to_its_due_count() -> None:
    """Catches a depth that is the head's count (100 at most) instead of the band's, and rounding that loses or
    adds a job: the tenant's types must sum to its due count, the figure the scaling alarm reads."""
    head = [("a", NOW)] * 2 + [("b", NOW)] + [("c", NOW)] * 0
    split = by_type([DueHead(1000, head), DueHead(2, [("c", NOW - 500), ("c", NOW)])], NOW)
    assert {name: d.due for name, d in split.items()} == {"a": 667, "b": 333, "c": 2}
    assert sum(d.due for d in split.values()) == 1002


def test_past_the_top_types_the_rest_is_other_and_unread_jobs_count_there() -> None:
    """Catches unbounded series (a tenant with thousands of types) and jobs dropped when a head read came back
    shorter than the count made a moment before (the index is eventually consistent)."""
    head = [(f"t{n}", NOW - n * 1000) for n in range(5)]
    split = by_type([DueHead(5, head), DueHead(3, [])], NOW, top=2)
    assert set(split) == {"t0", "t1", OTHER}
    assert split[OTHER].due == 3 + 3 and split[OTHER].oldest_due_age_s == 4.0
    assert sum(d.due for d in split.values()) == 8
    only_unread = by_type([DueHead(4, [])], NOW)
    assert {name: (d.due, d.oldest_due_age_s) for name, d in only_unread.items()} == {OTHER: (4, None)}
