"""The fence reconciler's decision for one record of the jobs table's stream (onward.domain.fence_reconciliation)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from onward.domain.fence_reconciliation import (
    Action,
    LateWrite,
    count_corrections,
    decide,
    epoch_of,
    late_write,
    new_home_attempts,
)
from onward.domain.states import RunOutcome

EPOCH = 1


def row(state: str = "queued", epoch: int | None = 0, attempt: int = 1, **more: Any) -> dict[str, Any]:
    image: dict[str, Any] = {"pk": "JOB#j1", "sk": "JOB", "state": state, "attempt": Decimal(attempt),
                             "version": Decimal(5), "updated_at": Decimal(1_000), **more}
    if epoch is not None:
        image["region_epoch"] = Decimal(epoch)
    return image


def run(attempt: int, epoch: int, outcome: str | None = None, **more: Any) -> dict[str, Any]:
    image: dict[str, Any] = {"pk": "JOB#j1", "sk": f"RUN#{attempt:06d}", "attempt": Decimal(attempt),
                             "worker_id": "w1", "claimed_at": Decimal(100), "region_epoch": Decimal(epoch), **more}
    if outcome is not None:
        image["outcome"] = outcome
    return image


def test_an_item_without_the_attribute_is_epoch_0() -> None:
    """Items written before any failover carry no `region_epoch`: reading them as anything but 0 would
    treat every old row as adopted and never adopt it."""
    assert epoch_of({"pk": "JOB#j1"}) == 0
    assert epoch_of(row(epoch=3)) == 3


def test_a_write_at_the_current_epoch_is_left_alone() -> None:
    """The new home's own writes (epoch e) and the restores themselves must not be reconciled again, or the
    reconciler would fight the home it serves."""
    assert decide(row(epoch=0), row(epoch=EPOCH), EPOCH).action is Action.NOTHING
    assert decide(None, row(epoch=EPOCH + 1), EPOCH).action is Action.NOTHING


def test_removals_and_items_outside_a_job_are_left_alone() -> None:
    """TTL deletions have no new image; tenant counters and idempotency items are rebuilt or kept by the
    adoption pass, not restored item by item."""
    assert decide(row(epoch=EPOCH), None, EPOCH).action is Action.NOTHING
    counter = {"pk": "TENANT#t#RUNNING#0", "sk": "RUNNING", "region_epoch": Decimal(0)}
    assert decide({**counter, "region_epoch": Decimal(EPOCH)}, counter, EPOCH).action is Action.NOTHING


def test_a_late_write_over_an_adopted_row_restores_the_adopted_row() -> None:
    """Last writer wins let the old home's completion overwrite the row the new home adopted: without the
    restore the new home's queued job would show the old home's `succeeded`, and its next transition (conditioned
    on region_epoch = e) would be refused forever."""
    adopted = row("queued", epoch=EPOCH, attempt=2)
    late = row("succeeded", epoch=0, attempt=2, updated_at=Decimal(2_000))
    decision = decide(adopted, late, EPOCH)
    assert decision.action is Action.RESTORE
    assert decision.image == adopted
    assert decision.late_epoch == 0
    assert decision.late == LateWrite("j1", 2, RunOutcome.SUCCEEDED, 2_000)


def test_a_late_run_record_is_restored_and_names_what_it_reported() -> None:
    """The adoption closed the run `region_failover`; the old home's report of that attempt replicates in:
    the run record goes back to the adoption's close, and the report is kept as the late report."""
    closed = run(3, EPOCH, "region_failover", finished_at=Decimal(500))
    late = run(3, 0, "failed", finished_at=Decimal(900))
    decision = decide(closed, late, EPOCH)
    assert decision.action is Action.RESTORE
    assert decision.late == LateWrite("j1", 3, RunOutcome.FAILED, 900)


def test_a_never_adopted_job_is_adopted() -> None:
    """A job the old home created (or finished) during the partition reaches the new home after the fence:
    without adoption its row stays at epoch e - 1 and no transition of the new home could move it."""
    created = decide(None, row("queued", epoch=0), EPOCH)
    assert (created.action, created.job_id, created.terminal) == (Action.ADOPT, "j1", False)
    finished = decide(row("running", epoch=0), row("succeeded", epoch=0), EPOCH)
    assert (finished.action, finished.terminal) == (Action.ADOPT, True)


def test_other_items_of_a_never_adopted_job_wait_for_their_row() -> None:
    """A result of a job not adopted is the row's adoption's business: restoring or adopting it on its own
    would write an item the adoption then contradicts. (A run record arriving on its own is MARKed: the
    consumer marks it only if its job's row is adopted, below.)"""
    result = {"pk": "JOB#j1", "sk": "RESULT", "attempt": Decimal(1), "region_epoch": Decimal(0)}
    assert decide(None, result, EPOCH).action is Action.NOTHING


def test_a_restore_of_an_intermediate_epoch_then_asks_for_adoption() -> None:
    """Epoch 2 in a Region where a row adopted at epoch 1 was overwritten by an epoch-0 write: the epoch-1 image
    comes back (it is newer than the late write), and its own record then says adopt (it is still below 2)."""
    at_one = row("queued", epoch=1)
    late = row("running", epoch=0)
    assert decide(at_one, late, 2).action is Action.RESTORE
    assert decide(late, at_one, 2).action is Action.ADOPT


def test_a_late_row_of_an_unclaimed_job_names_no_attempt() -> None:
    """Attempt 0 never ran: marking RUN#000000 would create a run record for nothing."""
    assert late_write("j1", row("queued", epoch=0, attempt=0)) is None


def test_new_home_attempts_are_those_written_at_the_epoch_but_the_adoptions_closes() -> None:
    """The run the adoption closed ran in the old home: naming it as an overlap partner would say the late
    attempt overlapped itself in the old home."""
    runs = [run(1, 0, "failed"), run(2, EPOCH, "region_failover"), run(3, EPOCH, "succeeded"), run(4, EPOCH)]
    assert new_home_attempts(runs, EPOCH, late_attempt=2) == [3, 4]
    assert new_home_attempts(runs, EPOCH, late_attempt=3) == [4]


states = st.sampled_from(["queued", "running", "retry_wait", "succeeded", "dead", "cancelled", "quarantined"])
epochs = st.integers(min_value=0, max_value=5)
images = st.builds(lambda state, epoch, attempt: row(state, epoch=epoch, attempt=attempt),
                   states, epochs, st.integers(min_value=0, max_value=4))


@given(old=st.none() | images, new=st.none() | images, epoch=st.integers(min_value=0, max_value=5))
def test_never_restores_an_image_over_one_of_its_own_or_a_newer_epoch(
        old: dict[str, Any] | None, new: dict[str, Any] | None, epoch: int) -> None:
    """The reconciler must only ever undo a write by an older epoch: restoring over an equal or newer epoch's
    image would undo the new home's own work (or a later failover's)."""
    decision = decide(old, new, epoch)
    if decision.action is Action.RESTORE:
        assert old is not None and new is not None and decision.image is old
        assert epoch_of(old) > epoch_of(new)
        assert epoch_of(new) < epoch
        # the restore's own record never asks for a restore again: no ping-pong between two images
        assert decide(new, old, epoch).action is not Action.RESTORE
    if new is not None and epoch_of(new) >= epoch:
        assert decision.action is Action.NOTHING


def test_an_old_home_s_run_record_arriving_as_an_item_of_its_own_is_marked_once() -> None:
    """The drill's first finding: an attempt the old home started whose claim never replicated arrives after
    the heal as a new run record (the new home numbers its attempts apart). Without MARK nothing says the job
    ran in both Regions; without the `fenced_by` test the mark's own stream record would be marked again and
    again. A later late write of the same run (its completion replacing the whole item, mark and all) is
    marked again, with what it reported."""
    claimed = decide(None, run(1, 0), EPOCH)
    assert claimed.action is Action.MARK and claimed.late == LateWrite("j1", 1, None, claimed.late.at)
    completed = {**run(1, 0), "outcome": "succeeded", "finished_at": Decimal(2_000)}
    again = decide(run(1, 0), completed, EPOCH)
    assert again.action is Action.MARK and again.late == LateWrite("j1", 1, RunOutcome.SUCCEEDED, 2_000)
    marked = {**completed, "fenced_by": "region_epoch", "late_report": "succeeded"}
    assert decide(completed, marked, EPOCH).action is Action.NOTHING
    assert decide(None, run(10_001, EPOCH), EPOCH).action is Action.NOTHING  # the new home's own


def counter(entity: str, epoch: int | None, **counts: int) -> dict[str, Any]:
    image: dict[str, Any] = {"pk": "TENANT#acme#QUEUE#0", "sk": "QUEUE", "entity": entity,
                             **{name: Decimal(value) for name, value in counts.items()}}
    if epoch is not None:
        image["region_epoch"] = Decimal(epoch)
    return image


def test_a_late_write_over_a_tenant_counter_of_the_epoch_is_corrected_by_its_differences() -> None:
    """The drill's second finding: the old home's late write of a queue entry or RUNNING counter replaces
    the new home's whole item with the old home's absolute counts. Without CORRECT the new home's counts are
    lost (a tenant's `waiting` ends below its queued jobs, `running` at -1); a restore of the old image would
    lose what the new home added between the late write and the restore, which adding differences keeps."""
    kept = counter("tenant_queue", EPOCH, waiting=5, w0=4, w3=1, entered=40)
    late = counter("tenant_queue", None, waiting=1, w0=1, entered=12)
    decision = decide(kept, late, EPOCH)
    assert decision.action is Action.CORRECT
    assert decision.corrections == {"waiting": 4, "w0": 3, "w3": 1, "entered": 28}
    running = decide(counter("tenant_running", EPOCH, running=2, ended=7),
                     counter("tenant_running", 0, running=0, ended=9), EPOCH)
    assert running.corrections == {"running": 2, "ended": -2}
    assert count_corrections(counter("tenant_queue", EPOCH, waiting=1), counter("tenant_queue", 0, waiting=1)) == {}
    on_entry = decide(counter("tenant_queue", EPOCH, waiting=1, running=3, started_ms_sum=30, ended=5),
                      counter("tenant_queue", 0, waiting=1, running=1, started_ms_sum=10, ended=6), EPOCH)
    assert on_entry.corrections == {"running": 2, "started_ms_sum": 20, "ended": -1}, \
        "the RUNNING counter kept on a queue entry (issue 34) is corrected with it"


def test_counters_not_replaced_over_the_epoch_are_left_alone() -> None:
    """The new home's own writes (new image at the epoch), the old home's writes over its own (the failover's
    rebuild sets those absolutely, or the first late write's record corrects them), settings and clocks:
    nothing. Correcting any of them would count a difference twice."""
    assert decide(counter("tenant_queue", 0, waiting=1), counter("tenant_queue", EPOCH, waiting=2),
                  EPOCH).action is Action.NOTHING
    assert decide(counter("tenant_queue", 0, waiting=1), counter("tenant_queue", 0, waiting=2),
                  EPOCH).action is Action.NOTHING
    assert decide(None, counter("tenant_queue", 0, waiting=2), EPOCH).action is Action.NOTHING
    clock = {"pk": "CLOCK#1", "sk": "CLOCK", "entity": "clock", "v": Decimal(7)}
    assert decide({**clock, "region_epoch": Decimal(EPOCH)}, clock, EPOCH).action is Action.NOTHING



def test_a_running_attempts_partial_run_record_is_never_a_late_write() -> None:
    """Issue 34: a running attempt's progress or overlap mark creates a partial record (no worker_id, no epoch
    stamp) before its close writes it whole. Read as an old home's run (epoch 0 < e) it would be MARKed: the new
    home's own running attempt fenced as a late write."""
    partial = {"pk": "JOB#j1", "sk": "RUN#010001", "progress": {"seq": Decimal(1)}}
    assert decide(None, partial, EPOCH).action is Action.NOTHING


def test_a_late_running_row_carries_its_attempts_claim_for_the_run_record_it_never_wrote() -> None:
    """Issue 34: a claim writes no run record, so an old home's attempt that never ended there leaves only its
    row: without the claim on the LateWrite the reconciler could not write the run record that says the job ran
    in both Regions (the drill's "every job that ran twice says so on its run records")."""
    late = late_write("j1", row("running", 0, attempt=3, lease_owner="w9", run_claimed_at=Decimal(500),
                                run_lease_expires_at=Decimal(900)))
    assert late is not None and late.claimed == ("w9", 500, 900)
    assert late_write("j1", row("succeeded", 0, attempt=3)).claimed is None
