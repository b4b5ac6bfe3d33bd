"""onward.domain.overlaps on its own: which attempts of one job ran at once, read from run records alone (pure).

Each test says what it would catch; the store's use of it (marking both runs when a zombie's evidence
arrives, the `overlaps` index, `onward overlaps`) is tested in tests/contract/test_batch_and_overlaps.py.
"""

from __future__ import annotations

from typing import Any

from onward.domain.models import Run
from onward.domain.overlaps import Interval, JobOverlap, overlap_began, overlaps, running_interval
from onward.domain.states import RunOutcome

JOB = "a" * 32
T = 1_800_000_000_000


def run(attempt: int, claimed: int, finished: int | None = None, outcome: RunOutcome | None = None,
        **fields: Any) -> Run:
    if finished is not None and outcome is None:
        outcome = RunOutcome.SUCCEEDED
    return Run(job_id=JOB, attempt=attempt, worker_id=f"w{attempt}", claimed_at=T + claimed,
               lease_expires_at=T + claimed + 30_000, finished_at=None if finished is None else T + finished,
               outcome=outcome, **fields)


def zombie(attempt: int, claimed: int, reaped: int, late: int | None = None, lost: int | None = None) -> Run:
    """A run the reaper closed (lease_expired), with the evidence that it kept working after."""
    outcome = RunOutcome.FENCED if late is not None else RunOutcome.LEASE_EXPIRED
    return run(attempt, claimed, reaped, outcome,
               reclaimed_as=RunOutcome.LEASE_EXPIRED if late is not None else None,
               late_report=RunOutcome.SUCCEEDED if late is not None else None,
               late_report_at=None if late is None else T + late,
               lease_lost_at=None if lost is None else T + lost)


def test_a_zombie_reporting_after_its_successor_claimed_overlapped_it_both_ways():
    """Reaped at 31 s, successor claimed at 32 s, the zombie's late report at 40 s: both attempts were
    running from 32 s to 40 s. Would catch an interval that ends at the reaper's close (finished_at) instead
    of at the late report: no overlap would ever be found, since the reaper always closes before the next
    claim."""
    runs = [zombie(1, 0, 31_000, late=40_000), run(2, 32_000, 50_000)]
    assert overlaps(runs) == {1: [2], 2: [1]}
    assert overlap_began(*runs) == T + 32_000


def test_a_zombie_reporting_before_its_successor_claimed_overlapped_nothing():
    """The late report at 33 s, the successor's claim at 35 s: the zombie had stopped (as far as anything
    shows) before the successor began. Would catch an interval taken as open (running on) for a fenced run,
    or one that runs to the successor's end."""
    assert overlaps([zombie(1, 0, 31_000, late=33_000), run(2, 35_000, 50_000)]) == {}


def test_touching_intervals_do_not_overlap():
    """The zombie's last report in the very millisecond its successor was claimed, and an attempt claimed in
    the millisecond the reaper closed the one before (the usual case under one clock): not an overlap.
    Would catch `<=` in place of `<` (every reaped-then-reclaimed job would be listed)."""
    assert overlaps([zombie(1, 0, 31_000, late=32_000), run(2, 32_000, 50_000)]) == {}
    assert overlaps([zombie(1, 0, 31_000), run(2, 31_000, 50_000)]) == {}
    assert overlaps([zombie(1, 0, 31_000, late=32_001), run(2, 32_000, 50_000)]) == {1: [2], 2: [1]}


def test_an_open_interval_runs_on_past_every_time_given():
    """A successor still running (no outcome) overlaps a zombie that reported any time after its claim,
    however late; a zombie whose run was left open (marked fenced while open: finished_at None) ends at its
    late report, not at infinity. Would catch an open run ending at its claim or its lease (a still-running
    successor would never be found), or a fenced open run taken as still running (it would overlap every
    later attempt)."""
    assert running_interval(run(2, 32_000)) == Interval(2, T + 32_000, None)
    assert overlaps([zombie(1, 0, 31_000, late=9_000_000), run(2, 32_000)]) == {1: [2], 2: [1]}
    left_open = run(1, 0, None, RunOutcome.FENCED, late_report=RunOutcome.FAILED, late_report_at=T + 5_000)
    assert running_interval(left_open) == Interval(1, T, T + 5_000)
    assert overlaps([left_open, run(2, 6_000)]) == {}
    assert overlaps([left_open, run(2, 4_000, 4_500, RunOutcome.SUCCEEDED)]) == {1: [2], 2: [1]}


def test_a_refused_lease_renewal_is_evidence_like_a_late_report():
    """No late report (the zombie died after its renewal was refused), but the refusal at 36 s shows it
    still working after its successor's claim at 32 s; the latest evidence wins when there are both. Would
    catch lease_lost_at being ignored (a zombie that is stopped by its refused renewal and dies before
    reporting would show nothing)."""
    assert overlaps([zombie(1, 0, 31_000, lost=36_000), run(2, 32_000, 50_000)]) == {1: [2], 2: [1]}
    assert running_interval(zombie(1, 0, 31_000, late=33_000, lost=36_000)).end == T + 36_000
    assert overlaps([zombie(1, 0, 31_000, lost=31_500), run(2, 32_000, 50_000)]) == {}


def test_a_zombie_that_never_reports_shows_no_overlap():
    """What cannot be seen: reaped and silent ever after. Its interval ends at the reaper's close, before
    any later claim. Would catch an interval stretched to the lease's expiry or beyond without evidence."""
    assert overlaps([zombie(1, 0, 31_000), run(2, 31_500, 39_000), run(3, 40_000)]) == {}


def test_every_pair_is_found_in_attempt_order_and_attempts_alone_are_left_out():
    """Attempts 1 and 2 both zombies still working when 3 ran; 4 came after all of them. Would catch only
    neighbouring attempts being compared (1 and 3 would be missed), or a list out of order."""
    runs = [run(4, 90_000, 95_000), zombie(2, 32_000, 63_000, late=70_000), run(3, 64_000, 80_000),
            zombie(1, 0, 31_000, late=66_000)]
    assert overlaps(runs) == {1: [2, 3], 2: [1, 3], 3: [1, 2]}
    assert overlaps([]) == {} and overlaps(runs[:1]) == {}


def test_a_listing_entry_shows_each_run_with_its_interval():
    """`onward overlaps --json` per job: the runs with their active interval (null: still running). Would
    catch a still-running attempt shown as ending at its claim."""
    listed = JobOverlap(JOB, "acme", "demo.echo", (
        zombie(1, 0, 31_000, late=40_000).model_copy(update={"overlapped_with": [2]}),
        run(2, 32_000).model_copy(update={"overlapped_with": [1]}))).as_dict()
    assert [(a["attempt"], a["active_until"], a["overlapped_with"]) for a in listed["attempts"]] == [
        (1, "2027-01-15T08:00:40.000Z", [2]), (2, None, [1])]
    assert (listed["tenant_id"], listed["type"], listed["attempts"][0]["outcome"]) == ("acme", "demo.echo", "fenced")
