"""The authority lease (onward.runtime.authority): a process acts only while it confirmed, within the lease,
that the witness names its Region; a witness naming another Region stops it at once; a newer epoch reaches the
store. With a fake clock and a fake witness, so every case is exact.

How it would break without the code: a process that kept acting on a witness it could no longer read would
write after the fence window (last writer wins would then keep the old home's write); one that waited for the
lease to run out after the witness named another Region would keep claiming in a partition for 30 s; a lease
that did not hand the epoch on would let the new home's store write under the old epoch."""

from __future__ import annotations

import pytest

from onward.domain.errors import RegionFenced
from onward.domain.models import NewJob
from onward.domain.regions import Witness
from onward.operator.witness import FakeWitness
from onward.runtime import authority
from onward.runtime.authority import AuthorityLease, AuthorityState, NotHome
from onward.runtime.worker import Registry, Worker
from onward.store.service import JobStore

HOME, STANDBY = "eu-west-1", "eu-central-1"
LEASE_S, CHECK_S = 30.0, 10.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Epochs:
    def __init__(self) -> None:
        self.set: list[int] = []

    def set_region_epoch(self, epoch: int) -> None:
        self.set.append(epoch)


def _lease(witness: FakeWitness, region: str = HOME, home_region: str | None = None
           ) -> tuple[AuthorityLease, FakeClock, Epochs]:
    clock, epochs = FakeClock(), Epochs()
    lease = AuthorityLease(witness, region, lease_s=LEASE_S, check_s=CHECK_S, home_region=home_region,
                           store=epochs, clock=clock)
    return lease, clock, epochs


def test_a_confirmed_home_acts_and_reads_the_witness_once_per_check() -> None:
    witness = FakeWitness(Witness(HOME, 0))
    lease, clock, _ = _lease(witness)
    assert lease.is_home() and lease.state is AuthorityState.HOME
    clock.now += CHECK_S - 1
    assert lease.is_home()
    assert witness.reads == 1  # within the check interval the last answer stands
    clock.now += 1
    assert lease.is_home()
    assert witness.reads == 2


def test_before_its_first_confirmation_a_process_does_not_act() -> None:
    witness = FakeWitness(Witness(HOME, 0))
    witness.unreachable = True
    lease, _, _ = _lease(witness)
    assert not lease.is_home()
    assert lease.state is AuthorityState.UNCONFIRMED


def test_a_witness_lost_for_less_than_the_lease_keeps_the_home_acting() -> None:
    witness = FakeWitness(Witness(HOME, 0))
    lease, clock, _ = _lease(witness)
    assert lease.is_home()
    witness.unreachable = True
    for _ in range(2):  # two failed checks, 20 s after the last confirmation
        clock.now += CHECK_S
        assert lease.is_home()
    assert witness.reads == 3


def test_a_witness_lost_for_longer_than_the_lease_stops_the_home_until_it_confirms_again() -> None:
    witness = FakeWitness(Witness(HOME, 0))
    lease, clock, _ = _lease(witness)
    assert lease.is_home()
    witness.unreachable = True
    clock.now += LEASE_S - 0.001
    assert lease.is_home()
    clock.now += 0.001  # the lease's end: the last confirmation is LEASE_S old
    assert not lease.is_home()
    assert lease.state is AuthorityState.UNCONFIRMED
    witness.unreachable = False
    clock.now += CHECK_S
    assert lease.is_home()


def test_a_witness_naming_another_region_stops_the_process_at_once_within_its_lease() -> None:
    witness = FakeWitness(Witness(HOME, 0))
    lease, clock, epochs = _lease(witness)
    assert lease.is_home()
    witness.record = Witness(STANDBY, 1)
    clock.now += CHECK_S  # 10 s into a 30 s lease
    assert not lease.is_home()
    assert lease.state is AuthorityState.STANDBY
    # The old home's store keeps its epoch: under the new one its creates (refused by nothing) and the claims
    # of those rows would be stamped as the new home's own, and no reconciler could tell them apart (the drill
    # found such a job running in A at epoch 1, reaped `lease_expired` by B's reaper, its counter at -1).
    assert epochs.set == []


def test_a_newer_epoch_in_the_witness_sets_the_stores_writer_epoch_once() -> None:
    witness = FakeWitness(Witness(STANDBY, 0))
    lease, clock, epochs = _lease(witness)
    assert not lease.is_home()  # the standby: never acts
    witness.record = Witness(HOME, 1)  # `onward failover --to HOME`
    clock.now += CHECK_S
    assert lease.is_home()
    clock.now += CHECK_S
    assert lease.is_home()
    assert epochs.set == [1]


def test_a_witness_never_written_names_the_configured_home_at_epoch_0() -> None:
    home, _, epochs = _lease(FakeWitness(None), home_region=HOME)
    standby, _, _ = _lease(FakeWitness(None), region=STANDBY, home_region=HOME)
    unknown, _, _ = _lease(FakeWitness(None))
    assert home.is_home() and not standby.is_home() and not unknown.is_home()
    assert standby.state is AuthorityState.STANDBY and unknown.state is AuthorityState.UNCONFIRMED
    assert epochs.set == []


def test_stopping_is_logged_once_not_on_every_check(caplog: pytest.LogCaptureFixture) -> None:
    witness = FakeWitness(Witness(STANDBY, 1))
    lease, clock, _ = _lease(witness)
    for _ in range(5):
        assert not lease.is_home()
        clock.now += CHECK_S
    assert sum("not confirmed home" in record.getMessage() for record in caplog.records) == 1


def test_a_store_without_a_lease_is_always_home(memory_store: JobStore) -> None:
    assert authority.is_home(memory_store)
    assert authority.state_of(memory_store) is AuthorityState.HOME
    authority.require_home(memory_store)


def test_a_standby_worker_claims_nothing_and_claims_once_the_witness_names_its_region(
        memory_store: JobStore) -> None:
    witness = FakeWitness(Witness(STANDBY, 0))
    lease, clock, _ = _lease(witness)
    authority.attach(memory_store, lease)
    created = memory_store.create("acme", NewJob(type="demo.echo"))
    registry = Registry()
    registry.register("demo.echo")(lambda context: "ok")
    worker = Worker(memory_store, registry, runner=_Inline())
    assert not worker.run_once()
    assert memory_store.get(created.job.job_id, "acme").state.value == "queued"
    witness.record = Witness(HOME, 1)
    clock.now += CHECK_S
    assert worker.run_once()
    assert memory_store.get(created.job.job_id, "acme").state.value == "succeeded"


def test_not_home_drops_the_report_and_refuses_the_renewal(memory_store: JobStore) -> None:
    witness = FakeWitness(Witness(HOME, 0))
    lease, clock, _ = _lease(witness)
    authority.attach(memory_store, lease)
    memory_store.create("acme", NewJob(type="demo.echo"))
    claimed = memory_store.claim("w-1", 30.0)
    assert claimed is not None
    witness.record = Witness(STANDBY, 1)
    clock.now += CHECK_S
    renewal = authority.renew_when_home(memory_store, claimed, 30.0)
    assert not renewal.held  # the handler is told its lease is lost
    reported: list[str] = []
    with pytest.raises(NotHome):
        authority.when_home(memory_store, lambda: reported.append("written"))()
    assert reported == []
    assert memory_store.get(claimed.job_id, "acme").state.value == "running"  # left for the new home to adopt


class _Inline:
    """Runs a handler in this process (no child process): what the worker does with its answer is the test."""

    def run(self, context, *, timeout_s: float, stop_grace_s: float):  # type: ignore[no-untyped-def]
        from onward.runtime.execution import Returned

        return Returned(result="ok")

    def close(self) -> None:
        pass


def test_a_renewal_refused_by_the_region_fence_is_a_lost_lease_not_a_failure_to_retry(memory_store: JobStore) -> None:
    """Without it the renewal thread would retry a write the epoch refuses until the lease ran out."""
    memory_store.create("acme", NewJob(type="demo.echo"))
    claimed = memory_store.claim("w-1", 30.0)
    assert claimed is not None

    class Fenced:
        def renew_lease(self, lease: object, lease_s: float) -> object:
            raise RegionFenced("the row is of epoch 1")

    assert not authority.renew_when_home(Fenced(), claimed, 30.0).held  # type: ignore[arg-type]


def test_the_health_answer_reads_the_witness_when_a_check_is_due() -> None:
    """Without the check an API process (which never claims) would answer `unconfirmed` forever."""
    witness = FakeWitness(Witness(STANDBY, 1))
    lease, clock, _ = _lease(witness)
    assert authority.authority_now(None) is AuthorityState.HOME  # no witness: one Region
    assert authority.authority_now(lease) is AuthorityState.STANDBY
    witness.record = Witness(HOME, 2)
    clock.now += CHECK_S
    assert authority.authority_now(lease) is AuthorityState.HOME
