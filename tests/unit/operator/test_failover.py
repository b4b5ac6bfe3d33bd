"""The fenced failover's steps (onward.operator.failover) over the in-memory store's region fence and a fake
witness, with a manual clock: the order of the steps, the fence window waited from the fence, the adoption,
and every refusal changing nothing.

How it would break without the code: a failover that raised the epoch before writing the witness would leave
the old home acting on a witness that still names it; one that adopted before the fence window would let the
old home's late writes win by timestamp; one that wrote anything on bad input (the same Region, a typo, an
unreachable witness) would leave two Regions disagreeing about the home."""

from __future__ import annotations

import pytest

from onward.domain.clock import ManualClock
from onward.domain.models import NewJob
from onward.domain.regions import Witness, epoch_of_version
from onward.domain.states import RunOutcome
from onward.operator.failover import FailoverFailed, FailoverPlan, FailoverRefused, fail_over, prepare
from onward.operator.witness import FakeWitness
from onward.store.service import JobStore

HOME, STANDBY = "eu-west-1", "eu-central-1"
REGIONS = frozenset({HOME, STANDBY, "us-east-1"})


def _plan(to: str = STANDBY, **changes: object) -> FailoverPlan:
    fields: dict[str, object] = {"to": to, "reason": "drill", "decided_by": "tester", "fence_window_s": 45.0,
                                 "on_aws": False, "known_regions": REGIONS, **changes}
    return FailoverPlan(**fields)  # type: ignore[arg-type]


class Sleeps:
    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.slept: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.clock.advance(seconds)


def test_a_failover_writes_the_witness_raises_the_epoch_waits_the_window_then_adopts(
        memory_store: JobStore, clock: ManualClock) -> None:
    queued = memory_store.create("acme", NewJob(type="demo.echo")).job
    running = memory_store.create("acme", NewJob(type="demo.echo")).job
    lease = memory_store.claim("w-1", 30.0)
    assert lease is not None
    witness = FakeWitness(Witness(HOME, 0))
    lines: list[str] = []
    sleeps = Sleeps(clock)
    prepared = prepare(_plan(), witness, memory_store)
    report = fail_over(_plan(), prepared, witness=witness, store=memory_store, say=lines.append, clock=clock,
                       sleep=sleeps)

    assert [step["step"] for step in report.steps] == [1, 2, 3, 4, 5, 6]
    assert witness.record == Witness(STANDBY, 1)
    epoch = memory_store.region_epoch()
    assert (epoch.epoch, epoch.home, epoch.previous_home, epoch.reason) == (1, STANDBY, HOME, "drill")
    assert epoch.fenced_at is not None and clock() - epoch.fenced_at >= 45_000  # adoption after the window
    assert sum(sleeps.slept) == pytest.approx(45.0, abs=0.01)
    assert (report.adopted, report.requeued, report.runs_closed) == (2, 1, 1)
    claimed_id = lease.job_id
    assert {queued.job_id, running.job_id} >= {claimed_id}
    runs = memory_store.runs(claimed_id, "acme")
    assert runs[-1].outcome is RunOutcome.REGION_FAILOVER
    assert memory_store.get(claimed_id, "acme").state.value == "queued"
    assert any(line.startswith("4. fence window") for line in lines)
    assert any("adoption page 1" in line for line in lines)


def test_the_same_region_as_home_is_refused_and_nothing_changes(memory_store: JobStore) -> None:
    witness = FakeWitness(Witness(HOME, 0))
    with pytest.raises(FailoverRefused, match="home already"):
        prepare(_plan(HOME), witness, memory_store)
    assert witness.record == Witness(HOME, 0) and memory_store.region_epoch().epoch == 0


def test_an_unknown_region_is_refused(memory_store: JobStore) -> None:
    witness = FakeWitness(Witness(HOME, 0))
    with pytest.raises(FailoverRefused, match="no such Region"):
        prepare(_plan("eu-wset-1"), witness, memory_store)
    assert witness.record == Witness(HOME, 0)


def test_an_unreachable_witness_is_refused_and_nothing_changes(memory_store: JobStore) -> None:
    witness = FakeWitness(Witness(HOME, 0))
    witness.unreachable = True
    with pytest.raises(FailoverRefused, match="witness cannot be read"):
        prepare(_plan(), witness, memory_store)
    assert memory_store.region_epoch().epoch == 0


def test_a_witness_never_written_takes_the_configured_home(memory_store: JobStore, clock: ManualClock) -> None:
    witness = FakeWitness(None)
    with pytest.raises(FailoverRefused, match="ONWARD_HOME_REGION"):
        prepare(_plan(), witness, memory_store)
    prepared = prepare(_plan(home_region=HOME), witness, memory_store)
    assert (prepared.previous_home, prepared.epoch) == (HOME, 1)


def test_an_epoch_raised_by_another_failover_between_the_checks_and_the_raise_fails_clearly(
        memory_store: JobStore, clock: ManualClock) -> None:
    witness = FakeWitness(Witness(HOME, 0))
    prepared = prepare(_plan(), witness, memory_store)
    memory_store.raise_region_epoch(1, home="us-east-1", previous_home=HOME, reason="other", decided_by="other")
    with pytest.raises(FailoverFailed, match="another failover raised it first"):
        fail_over(_plan(), prepared, witness=witness, store=memory_store, say=lambda _: None, clock=clock,
                  sleep=Sleeps(clock))
    assert memory_store.region_epoch().home == "us-east-1"


def test_a_failover_stopped_after_the_witness_resumes_at_the_epoch(memory_store: JobStore,
                                                                  clock: ManualClock) -> None:
    witness = FakeWitness(Witness(STANDBY, 1))  # an earlier run wrote the witness, then stopped
    prepared = prepare(_plan(home_region=HOME), witness, memory_store)
    assert prepared.resume and prepared.epoch == 1
    report = fail_over(_plan(), prepared, witness=witness, store=memory_store, say=lambda _: None, clock=clock,
                       sleep=Sleeps(clock))
    assert report.steps[0]["done"] is False and memory_store.region_epoch().epoch == 1


def test_a_second_writer_of_the_witness_loses_the_race(memory_store: JobStore, clock: ManualClock) -> None:
    witness = FakeWitness(Witness(HOME, 0))
    prepared = prepare(_plan(), witness, memory_store)
    witness.record = Witness("us-east-1", 1)  # another operator's failover wrote first
    with pytest.raises(FailoverFailed, match="wrote the witness first"):
        fail_over(_plan(), prepared, witness=witness, store=memory_store, say=lambda _: None, clock=clock,
                  sleep=Sleeps(clock))
    assert memory_store.region_epoch().epoch == 0  # the epoch was never raised



def test_the_adoption_is_recorded_last_and_a_run_stopped_before_it_resumes_the_adoption(
        memory_store: JobStore, clock: ManualClock) -> None:
    """`adopted_at` is what ends the new home's 503s on writes (onward.api.failover_gate). Recorded before the
    counters' rebuild, writes would enter queue entries the rebuild then sets anew; never recorded (a run that
    stopped in its adoption), the API would refuse writes for good: run again, it resumes at step 3 (no second
    raise, which would refuse as "home already") and adopts what is left."""
    memory_store.create("acme", NewJob(type="demo.echo"))
    witness = FakeWitness(Witness(HOME, 0))
    prepared = prepare(_plan(), witness, memory_store)
    recorded: list[object] = []
    rebuild = memory_store.rebuild_counters

    def rebuild_then_look(epoch: int) -> int:
        written = rebuild(epoch)
        recorded.append(memory_store.region_epoch().adopted_at)
        return written

    memory_store.rebuild_counters = rebuild_then_look  # type: ignore[method-assign]
    report = fail_over(_plan(), prepared, witness=witness, store=memory_store, say=lambda _: None, clock=clock,
                       sleep=Sleeps(clock))
    assert recorded == [None]  # not yet when the counters were rebuilt
    assert memory_store.region_epoch().adopted_at == clock() and report.adopted_at is not None

    # a second Region's failover stopped after its raise: the epoch item names it, its adoption not recorded
    memory_store.raise_region_epoch(2, home=HOME, previous_home=STANDBY, reason="back", decided_by="tester")
    witness.record = Witness(HOME, 2)
    left = memory_store.create("acme", NewJob(type="demo.echo")).job.job_id  # a row of an earlier epoch
    resumed = prepare(_plan(HOME), witness, memory_store)
    assert resumed.resume and resumed.adopting and resumed.epoch == 2 and resumed.previous_home == STANDBY
    lines: list[str] = []
    again = fail_over(_plan(HOME), resumed, witness=witness, store=memory_store, say=lines.append, clock=clock,
                      sleep=Sleeps(clock))
    assert memory_store.region_epoch().epoch == 2 and memory_store.region_epoch().adopted_at is not None
    assert again.adopted >= 1 and epoch_of_version(memory_store.get(left, "acme").version) == 2
    assert "already, its adoption not recorded (resuming)" in lines[1]
    with pytest.raises(FailoverRefused, match="home already"):  # adopted: nothing left to resume
        prepare(_plan(HOME), witness, memory_store)


class Mappings:
    def __init__(self, fails: bool = False) -> None:
        self.enabled: list[str] = []
        self.fails = fails

    def enable(self, mapping_id: str) -> None:
        if self.fails:
            raise RuntimeError("AccessDeniedException")
        self.enabled.append(mapping_id)


def test_the_reconcilers_mapping_is_enabled_after_the_raise_or_its_command_printed(
        memory_store: JobStore, clock: ManualClock) -> None:
    """The mapping is created disabled (no invocation per jobs-table record before a failover): a failover that
    did not enable it would leave late old-home writes unreconciled. A failure to enable it must not stop the
    failover (the runbook's command still reconciles from the trim horizon), but must say what to run."""
    mappings = Mappings()
    plan = _plan(on_aws=True, reconciler_mapping="a1b2-mapping")
    witness = FakeWitness(Witness(HOME, 0))
    lines: list[str] = []
    report = fail_over(plan, prepare(plan, witness, memory_store), witness=witness, store=memory_store,
                       say=lines.append, mappings=mappings, clock=clock, sleep=Sleeps(clock))
    assert mappings.enabled == ["a1b2-mapping"] and report.reconciler_enabled
    assert lines.index(next(line for line in lines if "mapping a1b2-mapping enabled" in line)) == 2  # after step 2

    back = _plan(HOME, on_aws=True, reconciler_mapping="c3d4-mapping")
    failing = Mappings(fails=True)
    lines.clear()
    report = fail_over(back, prepare(back, witness, memory_store), witness=witness, store=memory_store,
                       say=lines.append, mappings=failing, clock=clock, sleep=Sleeps(clock))
    assert not report.reconciler_enabled and memory_store.region_epoch().home == HOME
    assert any("update-event-source-mapping --region eu-west-1 --uuid c3d4-mapping --enabled" in line
               for line in lines)
