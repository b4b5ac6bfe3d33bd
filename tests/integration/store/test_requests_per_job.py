"""What one job costs in AWS requests on the hot path, and that the paths taken only when the cheap one
loses still answer as they always did.

A job with an Idempotency-Key that is created, claimed and completed costs 3 TransactWriteItems (one per
transition); a claim by a process that claimed a moment ago costs 1 BatchGetItem (its candidates' counters) and
1 Query (the ready index, which projects the whole row: the claim decides from the row it shows, and its
transaction's condition on the row's version refuses a row the index showed late, which is then read),
plus, only when it takes a queue's last job, 1 UpdateItem (the entry leaves the active index); a process's
first claim also reads the head of the active index (a Query per partition) and the parked entries due (a Query
per partition), and a process that creates or claims jobs reads the system clock (1 BatchGetItem) once a second
(the clock a returning tenant is lifted to), which later claims take from its caches (onward.store.claims,
onward.store.tenants). The create does not read the key first (its transaction's condition that the key is unused
does that), and the completion does not read the row (it decides from the row the claim wrote, with the usual
condition on its state, version and attempt). Each saving has a fallback, taken only when the transaction is
refused, which answers exactly as the read-first path did: an Idempotency-Key in use (replay: the same job,
200; another request: IdempotencyConflict), a fenced completion (FENCED, marked on the zombie's run record), a
cancel requested meanwhile (the report decided again from the row as it is now). Counted per backend: on
DynamoDB the requests the embedded endpoint serves on the stack's jobs table; in memory the recorder's calls,
named by the request each one is on DynamoDB.

The relay's poller (infra/onward_infra/pollers/ OutboxStreamPoller) keeps the stream's shard listing between polls:
DescribeStream only when a shard ended, every few seconds while busy, and before answering "nothing to
read", so a poller polled until idle still reads every shard, splits included.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from onward.domain.errors import IdempotencyConflict
from onward.domain.models import ErrorSummary, Job, Lease, NewJob
from onward.domain.states import JobState, RunOutcome
from onward.store.ports.index_shards import DEFAULT_ACTIVE_SHARDS, PARKED_SHARDS
from onward.store.ports.ready_queues import ready_queue
from onward.store.service import CancelStatus, Created, JobStore, ReportStatus
from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.pollers import OutboxStreamPoller
from tests.integration.pipeline.test_stream_topology import (
    NO_BACKOFF,
    NoRecovery,
    Outbox,
    Recorder,
    SpyStreams,
    assert_each_once_in_version_order,
    lineage_respected,
    poll_until_idle,
)
from tests.support import CallCounting

T = TypeVar("T")
ECHO = NewJob(type="demo.echo", params={"n": 1})
LEASE_S = 30


def refusal(operation: Callable[[], object]) -> Exception:
    """The exception `operation` raises."""
    try:
        operation()
    except Exception as error:  # noqa: BLE001 - the caller checks which
        return error
    raise AssertionError("not refused")


def version_history(store: JobStore, job: Job) -> list[tuple[int, str]]:
    return [(event.version, event.status.value) for event in store.events(job.job_id)]


# --- the hot path ---------------------------------------------------------------------------------------------

def test_one_job_created_with_a_key_claimed_and_completed_costs_3_transactions_and_no_row_read(metered):
    """The lifecycle of a job with an Idempotency-Key: create = 1 TransactWriteItems; a claim = 1
    TransactWriteItems when the process's claims read the counters and the queue's head a moment ago
    (onward.store.claims shares them for COUNTERS_SHARE_MS / DUE_HEAD_SHARE_MS, counting its own commits in);
    complete = 1 TransactWriteItems. The process's first claim reads the active index's head (one Query per
    partition), the parked entries due (one per partition), its candidates' counters (a BatchGetItem; the clock
    was read by the create, once a second) and the queue's head (a Query of the ready index: the rows it decides
    from); an entry whose last job was taken leaves the active index in the next claim that reads the counters
    itself. Without the claims' sharing, the second claim shows a BatchGetItem and a Query of its own again.
    Without the create going straight to its transaction (JobStore.create), the create shows a GetItem of the
    key first; without the report deciding from the claim's row (JobStore._report / _HeldRows), the completion
    shows a GetItem of the job row first; without the claim deciding from the ready index's row, each claim
    shows a GetItem of the row; without the claim's caches, every claim reads the head again."""
    store = metered.store
    created, create_cost = metered.count(lambda: store.create("acme", ECHO, idempotency_key="order-1"))
    store.create("acme", ECHO, idempotency_key="order-2")
    first, first_claim_cost = metered.count(lambda: store.claim("w1", LEASE_S))
    lease, claim_cost = metered.count(lambda: store.claim("w1", LEASE_S))
    assert first is not None and lease is not None
    if lease.job_id != created.job.job_id:
        lease, first = first, lease
    assert lease.job_id == created.job.job_id
    report, complete_cost = metered.count(lambda: store.complete(lease, {"rows": 3}))

    assert created.created
    assert create_cost == {"TransactWriteItems": 1}
    # (the second BatchGetItem: the rate limits its job is subject to, its tenant's and its type's, read once
    # per RATE_LIMIT_CACHE_MS a process: onward.store.rate_limits)
    assert first_claim_cost == {"Query": PARKED_SHARDS + DEFAULT_ACTIVE_SHARDS + 1, "BatchGetItem": 2,
                                "TransactWriteItems": 1}
    assert claim_cost == {"TransactWriteItems": 1}
    assert complete_cost == {"TransactWriteItems": 1}
    assert report.status is ReportStatus.APPLIED
    assert report.job == store.get(created.job.job_id)
    assert (report.job.state, report.job.version, report.job.lease_expires_at) == (JobState.SUCCEEDED, 3, None)
    assert version_history(store, report.job) == [(1, "queued"), (2, "running"), (3, "succeeded")]
    assert store.result(report.job.job_id) == {"rows": 3}


def test_a_result_costs_one_query_and_one_read_more_only_for_a_job_completed_before_issue_34(metered):
    """The result is on the run record that completed the job (issue 34): reading it is one Query of the
    job's last run record after the row's scoped read (a Query too: the API's path), where the result
    item's GetItem was; a job completed before keeps a result item, read with one GetItem more only when
    that run carries no result. Breaks if the readers read the result item first (every job pays a read for
    nothing), or never (such a job answers None)."""
    store = metered.store
    job = store.create("acme", ECHO).job
    lease = store.claim("w1", LEASE_S)
    assert lease is not None and lease.job_id == job.job_id
    store.complete(lease, {"rows": 3})

    result, cost = metered.count(lambda: store.result(job.job_id, "acme"))
    assert (result, cost) == ({"rows": 3}, {"Query": 2})
    metered.backend.keep_result_the_old_way(job.job_id)
    result, cost = metered.count(lambda: store.result(job.job_id, "acme"))
    assert (result, cost) == ({"rows": 3}, {"Query": 2, "GetItem": 1})


def test_a_claim_from_a_row_the_ready_index_showed_late_is_refused_and_decided_again_from_the_row(
        metered, monkeypatch):
    """The ready index is eventually consistent on AWS: the row it shows may be behind the job's. Here it
    shows the job as first queued (version 1) after the job was claimed and released (queued again, version
    3): the claim's transaction, conditioned on the row's version, is refused, the row is read (1 GetItem)
    and the job claimed from it (attempt 2, version 4). Breaks if the claim committed the index's row
    without that condition (the release would be overwritten) or kept trusting it after the refusal."""
    store = metered.store
    job = store.create("acme", ECHO).job
    recorder = store.recorder
    row = recorder.job(job.job_id)
    assert row is not None
    its_queue = ready_queue(job, row.ready_shards)
    late = recorder.due("acme", its_queue, job.created_at + 1, 8)  # the index as the job was created
    assert [(due.job_id, due.row is not None and due.row.job.version) for due in late] == [(job.job_id, 1)]
    first = store.claim("w0", LEASE_S)
    assert first is not None and store.release(first).applied
    monkeypatch.setattr(recorder, "due", lambda tenant_id, queue, now, limit: late if queue == its_queue else [])
    lease, cost = metered.count(lambda: store.claim("w1", LEASE_S))
    assert lease is not None and (lease.job_id, lease.attempt, lease.job.version) == (job.job_id, 2, 4)
    assert cost.get("GetItem") == 1 and cost.get("TransactWriteItems") == 2
    assert store.get(job.job_id).state is JobState.RUNNING


def test_a_renewed_lease_still_completes_with_one_transaction_and_leaves_no_lease_on_the_row(metered, clock):
    """A lease renewal changes the row (lease_expires_at) without a new version, so the claim's row still
    commits: one TransactWriteItems, no read, and the row ends with no lease (its expiry, which the claim's
    copy has at an older value, is removed, not left at the renewed one). If a renewal moved the version,
    every report after a heartbeat would be refused and read the row (2 transactions and a read); if the
    row update were written from the copy's values instead of removing the lease, the renewed expiry would
    stay on the ended job (and in the leases index the reaper reads)."""
    store = metered.store
    store.create("acme", ECHO)
    lease = store.claim("w1", LEASE_S)
    assert lease is not None
    clock.advance(10)
    renewal = store.renew_lease(lease, 60)
    assert renewal.held and renewal.lease_expires_at != lease.lease_expires_at
    report, cost = metered.count(lambda: store.complete(lease, None))
    assert cost == {"TransactWriteItems": 1}
    assert report.status is ReportStatus.APPLIED
    row = store.get(lease.job_id)
    assert row == report.job
    assert (row.state, row.version, row.lease_owner, row.lease_expires_at) == (JobState.SUCCEEDED, 3, None, None)
    (job_row,) = [item for item in metered.backend.jobs_table() if item["sk"] == "JOB"]
    assert not {"lease_expires_at", "lease_pk", "lease_owner"} & set(job_row)


def test_a_lease_this_store_did_not_claim_is_reported_by_reading_the_row(metered):
    """A worker whose lease came from another JobStore (another process): nothing remembered, so the report
    reads the row first (1 GetItem + 1 TransactWriteItems) and answers as always. Without the lookup of
    the claim's row by this store (it would trust any Lease it is handed), it would commit from a Job the
    caller built."""
    store = metered.store
    store.create("acme", ECHO)
    lease = metered.backend.store().claim("w1", LEASE_S)
    assert lease is not None
    report, cost = metered.count(lambda: store.complete(lease, {"ok": True}))
    assert cost == {"GetItem": 1, "TransactWriteItems": 1}
    assert report.status is ReportStatus.APPLIED and report.job.state is JobState.SUCCEEDED


def test_a_lease_rebuilt_from_its_json_is_reported_by_reading_the_row(metered):
    """A Lease that crossed a process boundary as JSON (equal, but not the object the claim returned) is not
    trusted as the claim's row: the report reads the row (1 GetItem + 1 TransactWriteItems). Without the
    identity check (_HeldRows.take), any Lease naming a remembered attempt would be decided from as is,
    whatever its job holds."""
    store = metered.store
    store.create("acme", ECHO)
    lease = store.claim("w1", LEASE_S)
    assert lease is not None
    rebuilt = Lease.model_validate_json(lease.model_dump_json())
    assert rebuilt == lease and rebuilt.job is not lease.job
    report, cost = metered.count(lambda: store.complete(rebuilt, {"ok": True}))
    assert cost == {"GetItem": 1, "TransactWriteItems": 1}
    assert report.status is ReportStatus.APPLIED and report.job.state is JobState.SUCCEEDED


# --- a batch of creates (JobStore.create_batch) -------------------------------------------------------------

def test_a_batch_of_100_jobs_costs_a_handful_of_transactions_not_100(metered):
    """100 jobs with an Idempotency-Key each: 4 TransactWriteItems (33 jobs a transaction: a job row, its
    first event and its key are 3 actions, plus one update of the tenant's queue entry summing its jobs,
    within DynamoDB's 100), nothing else; 100 without keys: 3 (49 a transaction). One at a time they cost
    100. Every job is created and counted on its queue entry. Without the summed entry update a transaction
    would name the entry once per job (refused by DynamoDB); without cutting, one request of 300 actions
    would be refused whole."""
    store = metered.store
    keyed = [(NewJob(type="demo.echo", params={"n": n}), f"order-{n}") for n in range(100)]
    answers, cost = metered.count(lambda: store.create_batch("acme", keyed))
    assert cost == {"TransactWriteItems": 4}
    assert sum(getattr(answer, "created", False) for answer in answers) == 100
    plain: list[tuple[NewJob, str | None]] = [(ECHO, None)] * 100
    answers, cost = metered.count(lambda: store.create_batch("acme", plain))
    assert cost == {"TransactWriteItems": 3}
    assert sum(getattr(answer, "created", False) for answer in answers) == 100
    assert store.tenant_states()["acme"].load().waiting == 200


def test_a_key_in_use_in_a_batch_costs_one_refused_transaction_and_the_reads_of_a_replay(metered):
    """One of 100 keys was used before: its transaction is refused (nothing written), the key and its job
    are read (2 GetItem, as a create's replay) and that transaction sent again without it: 5
    TransactWriteItems in all. Without naming the refused entry by the reasons' positions the store could
    not tell which entry to take out and would answer a whole transaction with its refusal."""
    store = metered.store
    earlier = store.create("acme", ECHO, idempotency_key="order-40").job
    entries: list[tuple[NewJob, str | None]] = [(ECHO, f"order-{n}") for n in range(100)]
    answers, cost = metered.count(lambda: store.create_batch("acme", entries))
    assert cost == {"TransactWriteItems": 5, "GetItem": 2}
    assert answers[40] == Created(earlier, created=False)
    assert sum(getattr(answer, "created", False) for answer in answers) == 99


# --- the fallbacks: an Idempotency-Key in use --------------------------------------------------------------

def test_an_idempotent_replay_answers_the_same_job_after_its_refused_transaction(metered):
    """The same request with the same key: the create's transaction is refused on the key's condition
    (nothing written), then the key and the job are read and the first job is answered, created=False,
    exactly as the read-first create answered (1 TransactWriteItems refused, 2 GetItem). Without the read
    after KEY_USED the replay would fail; without the key's condition in the transaction it would create a
    second job."""
    store = metered.store
    first = store.create("acme", ECHO, idempotency_key="order-7")
    items = metered.backend.item_counts()
    again, cost = metered.count(lambda: store.create("acme", ECHO, idempotency_key="order-7"))
    assert (first.created, again.created) == (True, False)
    assert again.job == first.job == store.get(first.job.job_id)
    assert metered.backend.item_counts() == items, "nothing written"
    assert cost == {"TransactWriteItems": 1, "GetItem": 2}


def test_the_same_key_with_another_request_is_refused_with_the_first_job_after_its_refused_transaction(metered):
    """The same key with another body: IdempotencyConflict naming the key and the first job, nothing
    written (1 TransactWriteItems refused, 1 GetItem of the key), as before. Without comparing the
    request's digest after KEY_USED the other body would get the first job back as if it were a replay."""
    store = metered.store
    first = store.create("acme", ECHO, idempotency_key="order-7")
    items = metered.backend.item_counts()
    other = NewJob(type="demo.echo", params={"n": 2})
    refused, cost = metered.count(lambda: refusal(lambda: store.create("acme", other, idempotency_key="order-7")))
    assert isinstance(refused, IdempotencyConflict)
    assert refused.job_id == first.job.job_id
    assert str(refused) == (f"Idempotency-Key 'order-7' was already used for another request "
                            f"(job {first.job.job_id})")
    assert metered.backend.item_counts() == items, "nothing written"
    assert cost == {"TransactWriteItems": 1, "GetItem": 1}


# --- the fallbacks: the row moved since the claim ----------------------------------------------------------

def test_a_completion_after_being_fenced_is_refused_reread_answered_fenced_and_marked(metered, clock):
    """The lease lapsed, the reaper closed the attempt and another worker claimed attempt 2: the zombie's
    completion from the claim's row is refused by the row's version condition (nothing written), the row is
    read, the attempt no longer holds it: FENCED with the row as it is, the late report marked on run 1
    (fenced, reclaimed_as lease_expired, late_report succeeded), no result, the new owner's row untouched.
    The zombie reports a second after attempt 2 began, so the two overlapped (onward.domain.overlaps): both runs
    say so (1 TransactWriteItems refused, 1 GetItem: the row, 1 Query: the job's partition, the zombie's run
    and the running attempt's row, 2 UpdateItem: the mark with its overlap, and the overlap on run 2, refused
    as run 2 has no record while it runs (issue 34), so 1 TransactWriteItems more: the overlap on run 2's
    partial record, on the condition that its row runs it). Without the attempt / version
    condition the zombie's result would overwrite the job; without the re-read after the refusal the store
    would retry the stale decision until StoreContention instead of answering FENCED."""
    store = metered.store
    job = store.create("acme", ECHO).job
    zombie = store.claim("w1", LEASE_S)
    assert zombie is not None
    clock.advance(LEASE_S + 1)
    assert [moved.job_id for moved in store.reap()] == [job.job_id]
    owner = store.claim("w2", LEASE_S)
    assert owner is not None and owner.attempt == 2
    row_before = store.get(job.job_id)
    clock.advance(1)

    report, cost = metered.count(lambda: store.complete(zombie, {"late": True}))

    assert cost == {"TransactWriteItems": 2, "GetItem": 1, "Query": 1, "UpdateItem": 2}
    assert report.status is ReportStatus.FENCED
    assert report.job == row_before == store.get(job.job_id)
    assert (report.job.state, report.job.attempt, report.job.lease_owner) == (JobState.RUNNING, 2, "w2")
    run = store.runs(job.job_id)[0]
    assert (run.outcome, run.reclaimed_as, run.late_report) == (
        RunOutcome.FENCED, RunOutcome.LEASE_EXPIRED, RunOutcome.SUCCEEDED)
    assert [run.overlapped_with for run in store.runs(job.job_id)] == [[2], [1]]
    assert store.result(job.job_id) is None
    assert version_history(store, job) == [(1, "queued"), (2, "running"), (3, "queued"), (4, "running")]
    assert store.complete(owner, {"ok": True}).status is ReportStatus.APPLIED  # the owner's still commits


def test_a_completion_after_a_cancel_request_is_decided_again_from_the_row_and_applies_once(metered):
    """A cancel while running moved the row (v3, cancel_requested) after the claim: the completion from the
    claim's row (v2) is refused, the row is read and the completion decided again: it wins the race, v4
    succeeded, one event per version (2 TransactWriteItems, one refused, 1 GetItem). Without the version in
    the row's condition the v2 decision would commit over v3 and publish a second v3; without deciding again
    the answer would be a refusal for a completion that applies."""
    store = metered.store
    job = store.create("acme", ECHO).job
    lease = store.claim("w1", LEASE_S)
    assert lease is not None
    assert store.cancel(job.job_id).status is CancelStatus.REQUESTED
    report, cost = metered.count(lambda: store.complete(lease, {"ok": True}))
    assert cost == {"TransactWriteItems": 2, "GetItem": 1}
    assert report.status is ReportStatus.APPLIED
    assert (report.job.state, report.job.version) == (JobState.SUCCEEDED, 4)
    assert report.job == store.get(job.job_id)
    assert version_history(store, job) == [(1, "queued"), (2, "running"), (3, "running"), (4, "succeeded")]


def test_a_failure_after_a_cancel_request_ends_cancelled_not_retried(metered):
    """A failure reported after a cancel was requested: decided from the claim's row (no cancel requested)
    it would go to retry_wait and run again; its transaction is refused (the cancel request made v3), the
    row is read, and the failure ends the job cancelled, the error kept, as when the row was read first
    (2 TransactWriteItems, one refused, 1 GetItem). Without the version condition the job would be retried
    although its tenant cancelled it."""
    store = metered.store
    job = store.create("acme", ECHO).job
    lease = store.claim("w1", LEASE_S)
    assert lease is not None
    store.cancel(job.job_id)
    report, cost = metered.count(lambda: store.fail(lease, ErrorSummary.of("Flaky", "once")))
    assert cost == {"TransactWriteItems": 2, "GetItem": 1}
    assert report.status is ReportStatus.APPLIED
    assert (report.job.state, report.job.version, report.job.last_error) == (
        JobState.CANCELLED, 4, ErrorSummary.of("Flaky", "once"))
    assert store.runs(job.job_id)[0].outcome is RunOutcome.FAILED


def test_a_cancel_acknowledged_after_the_heartbeat_said_so_applies_after_one_refusal(metered):
    """The worker learns of the cancel from its heartbeat and acknowledges it: its lease's row predates the
    request, so the first transaction is refused and the acknowledgement decided again from the row:
    cancelled at v4 (2 TransactWriteItems, 1 GetItem). A repeated acknowledgement (the answer was lost)
    is answered APPLIED again from the run record, nothing written."""
    store = metered.store
    job = store.create("acme", ECHO).job
    lease = store.claim("w1", LEASE_S)
    assert lease is not None
    store.cancel(job.job_id)
    assert store.renew_lease(lease, LEASE_S).cancel_requested
    report, cost = metered.count(lambda: store.acknowledge_cancel(lease))
    assert cost == {"TransactWriteItems": 2, "GetItem": 1}
    assert report.status is ReportStatus.APPLIED
    assert (report.job.state, report.job.version) == (JobState.CANCELLED, 4)
    again = store.acknowledge_cancel(lease)
    assert again.status is ReportStatus.APPLIED and again.job == report.job
    assert version_history(store, job)[-1] == (4, "cancelled") and len(store.events(job.job_id)) == 4


# --- the relay's poller: DescribeStream --------------------------------------------------------------------

class StoppedClock:
    """time.monotonic for a poller, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def outbox(endpoint: EmbeddedEndpoint) -> Outbox:
    """A stack of its own on the session's endpoint (4 stream shards), records put straight in its outbox."""
    return Outbox(endpoint)


def poller_on(outbox: Outbox, streams: Any, handler: Recorder, monotonic: StoppedClock,
              batch_size: int = 2) -> OutboxStreamPoller:
    relay: Any = NoRecovery()
    return OutboxStreamPoller(streams, outbox.arn, handler, relay, outbox.positions, batch_size=batch_size,
                              backoff=NO_BACKOFF, monotonic=monotonic)


def test_polls_that_take_records_list_the_shards_once_and_again_only_after_relist_every_s(outbox):
    """While polls keep finding records, the listing is reused: one DescribeStream for the first poll, none
    for the next ones, one more once RELIST_EVERY_S passed; a poll that finds nothing lists the stream
    before answering so. Without the cached listing every poll would describe the stream (one
    DescribeStream per poll, 0.43 per job in bench/e2e.py's burst)."""
    written = [(f"job-{n}", 1) for n in range(60)]
    for job, version in written:
        outbox.put(job, version)
    streams, recorder, clock = CallCounting(outbox.streams, "describe_stream"), Recorder(), StoppedClock()
    poller = poller_on(outbox, streams, recorder, clock)
    assert all(poller.poll_once() > 0 for _ in range(3))
    assert streams.calls == 1
    clock.now += 3.0  # RELIST_EVERY_S
    assert poller.poll_once() > 0
    assert streams.calls == 2
    while (taken := poller.poll_once()) > 0:
        pass
    assert taken == 0 and not poller.failing_shards
    assert_each_once_in_version_order(recorder.delivered(), written)
    idle = streams.calls
    assert poller.poll_once() == 0
    assert streams.calls == idle + 1, "an idle answer rests on a listing made in the same poll"


def test_a_split_under_a_cached_listing_is_found_and_read_parents_first(outbox):
    """Every shard splits while the poller holds a listing from before the split and its clock stands still
    (no relisting by time): the parents are read to their end, which makes the poller list the stream
    again and find them closed with their children, and every record is delivered once, each job's in
    version order, no child opened before its parent ended. Without relisting when a shard ends (or before
    an idle answer) the poller would never read the children."""
    jobs = [f"job-{n}" for n in range(20)]
    written = [(job, version) for version in (1, 2) for job in jobs]
    for job, version in written:
        outbox.put(job, version)
    spy = SpyStreams(outbox.streams)
    streams, recorder, clock = CallCounting(spy, "describe_stream"), Recorder(), StoppedClock()
    poller = poller_on(outbox, streams, recorder, clock)
    for _ in range(2):
        assert poller.poll_once() > 0
    assert 0 < len(recorder.accepted) < len(written), "part way through the parents"

    outbox.endpoint.split_stream_shards(outbox.table)
    later = [(job, version) for version in (3, 4) for job in jobs]
    for job, version in later:
        outbox.put(job, version)
    written += later
    polls = 0
    while poller.poll_once():
        polls += 1
    assert not poller.failing_shards
    assert_each_once_in_version_order(recorder.delivered(), written)
    lineage_respected(spy, outbox.shards())
    assert streams.calls < polls, "the listing was reused between polls"


def test_a_shard_listed_only_now_is_read_before_the_poller_answers_idle(outbox):
    """A shard that the listing did not show (HiddenShards, as when DescribeStream has not caught up) and
    that appears later is read by the first poll after it appears, although the clock stands still: the poll
    finds nothing on its cached listing, lists again and reads the new shard. Without the listing before an
    idle answer, polling until idle would stop with the shard unread."""
    from tests.integration.pipeline.test_stream_topology import HiddenShards

    written = [(f"job-{n}", 1) for n in range(24)]
    for job, version in written:
        outbox.put(job, version)
    hidden_shard = next(shard_id for shard_id, records in outbox.by_shard().items() if records)
    streams = HiddenShards(outbox.streams)
    streams.hidden = {hidden_shard}
    recorder, clock = Recorder(), StoppedClock()
    poller = poller_on(outbox, streams, recorder, clock, batch_size=100)
    poll_until_idle(poller)
    assert Counter(recorder.delivered()) < Counter(written)
    streams.hidden = set()
    assert poller.poll_once() > 0
    poll_until_idle(poller)
    assert_each_once_in_version_order(recorder.delivered(), written)
