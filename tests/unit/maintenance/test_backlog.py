"""How one ready queue's due jobs are counted from its bounded counts (onward.maintenance.backlog.due_in_queue)."""

from __future__ import annotations

from onward.maintenance.backlog import due_in_queue
from onward.store.backlog_reads import COUNT_CAP, Count


def test_a_complete_count_of_the_jobs_not_due_leaves_exactly_the_due_ones() -> None:
    """Without subtracting them, delayed jobs and jobs in backoff would count as due."""
    assert due_in_queue(10, Count(3, complete=True), None) == 7
    assert due_in_queue(10, Count(0, complete=True), None) == 10
    # the index ahead of the entry's count (eventually consistent reads): never below zero
    assert due_in_queue(2, Count(3, complete=True), None) == 0


def test_past_the_cap_of_jobs_not_due_the_due_ones_are_counted_directly() -> None:
    """A queue with more than COUNT_CAP delayed jobs: their count stopped at the cap, so waiting minus it would
    count delayed jobs as due."""
    assert due_in_queue(COUNT_CAP + 500, Count(COUNT_CAP, complete=False), Count(12, complete=True)) == 12


def test_past_the_cap_on_both_sides_the_count_is_an_upper_bound_of_at_least_the_cap() -> None:
    """Both ranges hold COUNT_CAP or more: at least COUNT_CAP are due, at most waiting - COUNT_CAP."""
    waiting = 10 * COUNT_CAP
    assert due_in_queue(waiting, Count(COUNT_CAP, complete=False), Count(COUNT_CAP, complete=False)) == \
        waiting - COUNT_CAP
    assert due_in_queue(COUNT_CAP + 1, Count(COUNT_CAP, complete=False), Count(COUNT_CAP, complete=False)) == \
        COUNT_CAP
