"""The fence reconciler on two Regions of the embedded endpoint with the replicator between them (issue 39,
docs/regional-recovery.md "What the fence does not rely on"): the home A keeps running through a partition
while B is failed over to epoch 1; when the partition heals, A's late epoch-0 writes replicate into B, last
writer wins lets them overwrite B's adopted items, and B's reconciler, reading B's jobs stream through the local
event source mapping (JobsStreamPoller) and the Lambda handler's code path, undoes them and adopts what B never
adopted.

How it would break without the code: without the restore, B's row of the job would show A's `succeeded` by
attempt 1 at epoch 0 (B's own completion by attempt 10001 lost, and every later transition of B refused by the
epoch condition); without the marks `onward overlaps` would not say the job ran twice; without the adoption,
the job A created during the partition would sit at epoch 0 in B, where no claim of B may move it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from onward.bootstrap import Deployment
from onward.domain.models import NewJob
from onward.domain.states import JobState, RunOutcome
from onward.entrypoints.fence_reconciler import reconcile_event
from onward.pipeline.fence_reconciler.reconciler import FenceReconciler, ReconcileTally
from onward.settings import Settings
from onward.store.service import JobStore
from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.pipeline import reconciler_poller_of
from onward_infra.replication.replicator import Replicator, tables_of

pytestmark = pytest.mark.integration

# Regions of their own: an endpoint's moto backends are per Region and outlive it (docs/local-stack.md)
HOME, STANDBY = "sa-east-1", "ca-central-1"
STACK = "fence-reconciler"
TENANT = "acme"


@dataclass
class Failover:
    home: Deployment
    standby: Deployment
    replicator: Replicator
    raced: str  # ran at attempt 1 in A through the partition, and at attempt 10001 in B after the failover
    unseen: str  # claimed and run in A during the partition (never replicated), adopted queued by B and run there
    partitioned: str  # created in A during the partition
    running_in_b: tuple[int, int]  # B's tenant RUNNING counter (running, ended) just before the heal
    tally: ReconcileTally
    second: ReconcileTally  # the same records delivered again


def _adopt_all(store: JobStore, epoch: int) -> int:
    adopted, cursor = 0, None
    while True:
        page = store.adopt_page(epoch, cursor=cursor)
        adopted += page.adopted
        if page.cursor is None:
            return adopted
        cursor = page.cursor


def _reconcile(standby: Deployment, poller: Any) -> ReconcileTally:
    tally = ReconcileTally()
    reconciler = FenceReconciler(standby.client("dynamodb"), standby.settings.require("jobs_table"),
                                 standby.job_store)
    poller._handler = lambda event, context: reconcile_event(event, context, reconciler, tally)
    while poller.poll_once():
        pass
    return tally


@pytest.fixture(scope="module")
def failover() -> Iterator[Failover]:
    with EmbeddedEndpoint(region=HOME) as a, EmbeddedEndpoint(region=STANDBY) as b:
        environments = {HOME: a.deploy(STACK, jobs_stream=True).environment,
                        STANDBY: b.deploy(STACK, jobs_stream=True).environment}
        with Replicator([a, b], tables_of(environments)) as replicator:
            home = Deployment(Settings.from_environment(environments[HOME]))
            standby = Deployment(Settings.from_environment(environments[STANDBY]))
            store_a: JobStore = home.job_store
            store_b: JobStore = standby.job_store

            raced = store_a.create(TENANT, NewJob(type="demo.echo")).job.job_id
            lease_a = store_a.claim("worker-a", 60)
            assert lease_a is not None and lease_a.job_id == raced
            unseen = store_a.create(TENANT, NewJob(type="demo.echo")).job.job_id
            assert replicator.wait_idle()

            replicator.partition(HOME)  # A keeps running and writing; nothing crosses either way
            unseen_a = store_a.claim("worker-a", 60)  # its claim and run never reach B before the failover
            assert unseen_a is not None and unseen_a.job_id == unseen and unseen_a.attempt == 1
            store_a.complete(unseen_a, "unseen-from-a")
            partitioned = store_a.create(TENANT, NewJob(type="demo.echo")).job.job_id

            store_b.raise_region_epoch(1, home=STANDBY, previous_home=HOME, reason="drill", decided_by="test")
            store_b.set_region_epoch(1)
            assert _adopt_all(store_b, 1) == 2  # the raced job (attempt 1 closed region_failover), the unseen one
            store_b.rebuild_counters(1)
            for _ in range(2):
                lease_b = store_b.claim("worker-b", 60)
                assert lease_b is not None and lease_b.job.attempt == 10_001  # numbered apart in epoch 1
                store_b.complete(lease_b, "from-b")
            store_b.create(TENANT, NewJob(type="demo.echo"))
            assert store_b.claim("worker-b", 60) is not None  # B's attempt still running as A's late write lands
            usage = store_b.tenant_states()[TENANT].usage
            running_in_b = (usage.running, usage.ended)

            store_a.complete(lease_a, "from-a")  # the old home, unaware: later than all of B's writes
            replicator.heal()
            assert replicator.wait_idle()
            # last writer wins let A's completion overwrite B's adopted and completed row
            assert store_b.get(raced).attempt == 1

            poller = reconciler_poller_of(standby)
            assert poller is not None
            tally = _reconcile(standby, poller)
            # the same records again, as Lambda redelivers them after a crash
            again = reconciler_poller_of(standby)
            assert again is not None
            again._positions = _NoPositions()
            second = _reconcile(standby, again)
            yield Failover(home, standby, replicator, raced, unseen, partitioned, running_in_b, tally, second)


class _NoPositions:
    """A checkpoint store that never remembers: a poller built on it starts at the trim horizon again."""

    def checkpoint(self, consumer: str, shard_id: str) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def test_a_late_write_over_an_adopted_job_is_restored(failover: Failover) -> None:
    """B's own completion (attempt 2, epoch 1) is what B shows again, and its result. A's late result was written
    on A's run 1 (issue 34: the result is on the completing run record), which the restore puts back as the
    adoption closed it; B's result, on B's own run record, was never overwritten (a result item of its own was,
    and was restored: one restore more before issue 34)."""
    store_b = failover.standby.job_store
    job = store_b.get(failover.raced)
    assert (job.state, job.attempt) == (JobState.SUCCEEDED, 10_001)
    assert store_b.result(failover.raced) == "from-b"
    assert failover.tally.restored >= 2  # the row and run 1
    # the unseen job's run 1; the raced job's run 1 twice: its late image as the row's record found it, then
    # the closure its own record restored (a mark the restore writes over: one write more, nothing wrong)
    assert failover.tally.marked == 3


def test_the_late_attempt_is_marked_fenced_and_both_runs_overlapped(failover: Failover) -> None:
    """Run 1 (closed region_failover by the adoption) says what the old home reported late, and both runs
    name each other: `onward overlaps` lists the job."""
    runs = {run.attempt: run for run in failover.standby.store_reads.runs(failover.raced)}
    late = runs[1]
    assert (late.outcome, late.reclaimed_as, late.late_report) == (
        RunOutcome.FENCED, RunOutcome.REGION_FAILOVER, RunOutcome.SUCCEEDED)
    assert late.fenced_by == "region_epoch" and late.late_report_at is not None
    assert late.overlapped_with == [10_001] and runs[10_001].overlapped_with == [1]
    assert runs[10_001].outcome is RunOutcome.SUCCEEDED
    listed = failover.standby.overlap_reader.since(0)
    assert sorted(overlap.job_id for overlap in listed) == sorted([failover.raced, failover.unseen])


def test_an_attempt_of_the_old_home_that_never_replicated_keeps_its_own_run_record_marked(
        failover: Failover) -> None:
    """The drill's first finding. Without attempts numbered apart B's claim of the job it adopted queued
    would be attempt 1 again: A's `RUN#000001` arriving after the heal, older than B's, would be dropped by
    last writer wins and nothing would say the job ran in both Regions; without MARK it would arrive but
    say nothing (no late report, no overlap: `onward overlaps` would not list it)."""
    store_b = failover.standby.job_store
    assert (store_b.get(failover.unseen).attempt, store_b.result(failover.unseen)) == (10_001, "from-b")
    runs = {run.attempt: run for run in failover.standby.store_reads.runs(failover.unseen)}
    assert sorted(runs) == [1, 10_001]
    assert runs[1].fenced_by == "region_epoch" and runs[1].late_report is RunOutcome.SUCCEEDED
    assert runs[1].overlapped_with == [10_001] and runs[10_001].overlapped_with == [1]
    assert runs[10_001].outcome is RunOutcome.SUCCEEDED and runs[10_001].fenced_by is None


def test_a_job_adopted_after_the_counters_rebuild_enters_its_queue_entry(failover: Failover) -> None:
    """The drill's second finding, in part: the partitioned job's row reached B after the failover rebuilt
    the counters, so they never counted it. Adopted as a restamp it would leave its tenant's `waiting` at 0
    with a job queued, and the claim that takes it would bring it to -1 (its tenant then skipped)."""
    states = failover.standby.job_store.tenant_states()
    assert sum(entry.waiting for entry in states[TENANT].queues.values()) == 1
    assert failover.standby.job_store.get(failover.partitioned).state is JobState.QUEUED


def test_a_job_created_in_the_old_home_during_the_partition_is_adopted(failover: Failover) -> None:
    """Its row reached B after the fence at epoch 0; the reconciler adopts it: queued under epoch 1."""
    job = failover.standby.job_store.get(failover.partitioned)
    assert job.state is JobState.QUEUED
    assert job.version > 2**32
    assert failover.tally.adopted == 1


def test_records_delivered_again_change_nothing(failover: Failover) -> None:
    """Every write is conditional: a second delivery of the whole stream restores, adopts and marks nothing."""
    second = failover.second
    assert (second.restored, second.adopted, second.marked, second.overlaps) == (0, 0, 0, 0)
    assert failover.standby.job_store.get(failover.raced).attempt == 10_001


def test_a_late_write_of_a_tenant_counter_is_corrected_keeping_what_b_counted(failover: Failover) -> None:
    """The drill's second finding: A's completion after the failover wrote A's RUNNING counter (A's absolute
    counts: nothing running) over B's, one attempt running. Without the correction B's counter would say 0
    running with one running, and -1 once it ends; restored as B's old image instead it would lose whatever
    B added between the late write and the restore."""
    usage = failover.standby.job_store.tenant_states()[TENANT].usage
    assert usage.running == failover.running_in_b[0] == 1
    assert failover.tally.corrected >= 1
    assert failover.second.corrected == 0  # delivered again: corrected once
