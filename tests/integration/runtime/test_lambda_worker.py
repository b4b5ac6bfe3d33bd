"""The Lambda worker (onward/entrypoints/worker.py) on the embedded endpoint: its handler fed Kinesis events of
the shape Lambda sends (the `sam local generate-event` sample, carrying the jobs' real outbox events as the
relay encodes them), with a LambdaContext whose remaining time the test sets; and the whole wake-up path,
outbox -> relay -> events stream -> the mapping's filter -> worker, driven by the local event-source pollers
as Lambda's mappings would drive it, with the create-to-start latency measured.

What a test may not assume: how fast this machine is. Timings are only compared with each other or with the
template's own periods; the figures are printed.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from onward.bootstrap import Deployment
from onward.domain.clock import system_clock
from onward.domain.models import NewJob
from onward.domain.states import TERMINAL_STATES, JobState
from onward.entrypoints import worker as worker_handler
from onward.pipeline.relay.publisher import encode
from onward.store.service import JobStore
from onward_infra.lambda_context import LocalLambdaContext
from onward_infra.platform import BackgroundLoop
from onward_infra.pollers import EventsStreamPoller
from onward_infra.template import load_template
from tests.lambda_filters import filtered, mapping_filters, record_passes

pytestmark = pytest.mark.integration

LEASE_S = 5
SAMPLE = Path(__file__).resolve().parents[2] / "events" / "sam" / "kinesis-get-records.json"
STREAM_ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/onward-events"
# How often Lambda's mappings poll (the local loops wait this long when a poll found nothing): a DynamoDB
# stream shard four times a second, a Kinesis shard once a second (standard iterators, no enhanced fan-out).
RELAY_POLL_S = 0.25
KINESIS_POLL_S = 1.0


@dataclass(frozen=True)
class BudgetContext(LocalLambdaContext):
    """A Lambda context whose remaining time is what `remaining_ms()` answers at each call."""

    remaining_ms: Callable[[], int] = field(default=lambda: 300_000)

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms()


@pytest.fixture
def worker_environment(stack_environment: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The stack's variables plus what template.yaml sets for the worker function (one job at a time unless a
    test sets ONWARD_WORKER_CONCURRENCY)."""
    monkeypatch.setenv("ONWARD_WORKER_MODULE", "onward.runtime.demo_jobs")
    monkeypatch.setenv("ONWARD_WORKER_LEASE_S", str(LEASE_S))
    monkeypatch.setenv("ONWARD_WORKER_CONCURRENCY", "1")
    return stack_environment


def job_store() -> JobStore:
    """The handler's own store: its Deployment's, for this test's environment."""
    return Deployment.from_environment().job_store


def wake_ups(store: JobStore, job_ids: list[str]) -> dict[str, Any]:
    """A Kinesis event as Lambda delivers it after the mapping's filter: the jobs' `queued` events from the
    outbox, encoded as the relay puts them on the stream, in the shape of the generated sample."""
    template = json.loads(SAMPLE.read_text())["Records"][0]
    records = []
    for number, event in enumerate((e for job_id in job_ids for e in store.events(job_id)
                                    if e.status is JobState.QUEUED), start=1):
        record = copy.deepcopy(template)
        record["kinesis"] |= {"data": base64.b64encode(encode(event)).decode(), "partitionKey": event.job_id,
                              "sequenceNumber": str(number)}
        record["eventID"] = f"shardId-000000000000:{number}"
        record["eventSourceARN"] = STREAM_ARN
        records.append(record)
    event = {"Records": records}
    assert filtered(mapping_filters("WorkerFunction", "Wake"), event) == event  # what the filter lets through
    return event


def ended(store: JobStore, job_ids: list[str]) -> int:
    return sum(store.get(job_id).state in TERMINAL_STATES for job_id in job_ids)


def until_ended(store: JobStore, job_ids: list[str], count: int) -> Callable[[], int]:
    """Remaining time: a lease and a second while fewer than `count` of the jobs have ended, then exactly a
    lease (too little to claim): the invocation may start `count` jobs, one at a time."""
    return lambda: LEASE_S * 1000 + (1000 if ended(store, job_ids) < count else 0)


# --- the handler, fed wake-ups -------------------------------------------------------------------------------

def test_a_wake_up_runs_the_job_dispatch_picks_not_the_job_it_names(worker_environment) -> None:
    """Tenant aaa has used worker time; bbb has not, and its job has waited longer. A wake-up for aaa's new
    job X runs bbb's job (the fair claim's pick; by tenant id alone aaa would come first): following the
    event would let a tenant that submits often jump the queue. X is run by the next invocation."""
    store = job_store()
    warm_up = store.create("aaa", NewJob(type="demo.sleep", params={"seconds": 0.5})).job.job_id
    assert worker_handler.handler(wake_ups(store, [warm_up]), BudgetContext("onward-worker")) == {
        "batchItemFailures": []}
    assert store.get(warm_up).state is JobState.SUCCEEDED
    waiting = store.create("bbb", NewJob(type="demo.echo")).job.job_id
    x = store.create("aaa", NewJob(type="demo.echo")).job.job_id

    one_job = BudgetContext("onward-worker", remaining_ms=until_ended(store, [waiting, x], 1))
    assert worker_handler.handler(wake_ups(store, [x]), one_job) == {"batchItemFailures": []}

    assert store.get(waiting).state is JobState.SUCCEEDED
    assert store.get(x).state is JobState.QUEUED
    assert worker_handler.handler(wake_ups(store, [x]), BudgetContext("onward-worker")) == {
        "batchItemFailures": []}
    assert store.get(x).state is JobState.SUCCEEDED


def test_one_invocation_runs_as_many_jobs_at_once_as_configured(worker_environment, monkeypatch) -> None:
    """Four 2 s jobs, three workers per invocation: exactly three are claimed before the first ends (one at
    a time, the old worker's way, would claim one; an unbounded one, four), the fourth when a worker frees."""
    monkeypatch.setenv("ONWARD_WORKER_CONCURRENCY", "3")
    store = job_store()
    jobs = [store.create(f"t{n}", NewJob(type="demo.sleep", params={"seconds": 2})).job.job_id for n in range(4)]

    response = worker_handler.handler(wake_ups(store, jobs[:1]), BudgetContext("onward-worker"))

    assert response == {"batchItemFailures": []}
    assert [store.get(job_id).state for job_id in jobs] == [JobState.SUCCEEDED] * 4
    runs = [store.runs(job_id)[0] for job_id in jobs]
    first_end = min(run.finished_at or 0 for run in runs)
    assert sum(run.claimed_at < first_end for run in runs) == 3
    assert len({run.worker_id for run in runs}) == 3


def test_claiming_stops_when_no_more_than_a_lease_of_the_invocation_is_left(worker_environment) -> None:
    """Five due jobs; the context says a lease and a second remain until three have ended, then a lease: the
    invocation runs three and returns, leaving two queued for the next. Claiming on would start a job that
    Lambda's timeout could cut off mid-run (its lease would lapse and its attempt be charged)."""
    store = job_store()
    jobs = [store.create("acme", NewJob(type="demo.echo", params={"n": n})).job.job_id for n in range(5)]
    context = BudgetContext("onward-worker", remaining_ms=until_ended(store, jobs, 3))

    assert worker_handler.handler(wake_ups(store, jobs), context) == {"batchItemFailures": []}

    states = [store.get(job_id).state for job_id in jobs]
    assert states.count(JobState.SUCCEEDED) == 3 and states.count(JobState.QUEUED) == 2


def test_a_delayed_jobs_creation_event_does_not_make_the_worker_wait(worker_environment) -> None:
    """The creation event of a job delayed by an hour wakes an invocation (the event says `queued`, not
    when): it claims, finds nothing due and returns at once, well within a lease, instead of waiting for the
    run_at (the backstop schedule claims the job when it is due)."""
    store = job_store()
    delayed = store.create("acme", NewJob(type="demo.echo", delay_s=3600)).job.job_id
    started = time.monotonic()
    assert worker_handler.handler(wake_ups(store, [delayed]), BudgetContext("onward-worker")) == {
        "batchItemFailures": []}
    assert time.monotonic() - started < LEASE_S
    assert store.get(delayed).state is JobState.QUEUED and store.runs(delayed) == []


def test_records_fail_only_when_the_invocation_could_not_work_never_for_a_jobs_failure(
        worker_environment, monkeypatch) -> None:
    """A job that fails is retried by its own policy (retry_wait): its wake-up is not reported failed, or
    Lambda would retry the batch and hold back its shard for nothing. When no claim gets an answer (here the
    jobs table does not exist), every record is reported, so that Lambda tries the wake-ups again."""
    store = job_store()
    failing = store.create("acme", NewJob(type="demo.fail", max_attempts=3)).job.job_id
    event = wake_ups(store, [failing])
    assert worker_handler.handler(event, BudgetContext("onward-worker")) == {"batchItemFailures": []}
    assert store.get(failing).state is JobState.RETRY_WAIT

    monkeypatch.setenv("JOBS_TABLE", "no-such-table")
    response = worker_handler.handler(event, BudgetContext("onward-worker"))
    assert response == {"batchItemFailures": [{"itemIdentifier": r["kinesis"]["sequenceNumber"]}
                                              for r in event["Records"]]}


def test_the_backstop_schedule_runs_what_became_due_with_no_event(worker_environment) -> None:
    """A failed job's retry becomes due when its backoff ends, with no event: the scheduled invocation (the
    same handler, an EventBridge event without Records) claims it and answers how many jobs it ran."""
    store = job_store()
    flaky = store.create("acme", NewJob(type="demo.flaky", params={"failures": 1})).job.job_id
    assert worker_handler.handler(wake_ups(store, [flaky]), BudgetContext("onward-worker")) == {
        "batchItemFailures": []}
    job = store.get(flaky)
    assert job.state is JobState.RETRY_WAIT
    scheduled = json.loads((SAMPLE.parent / "cloudwatch-scheduled-event.json").read_text())
    time.sleep(max(0.0, (job.not_before - system_clock()) / 1000) + 0.1)  # the backoff ends
    assert worker_handler.handler(scheduled, BudgetContext("onward-worker")) == {"ran": 1}
    assert store.get(flaky).state is JobState.SUCCEEDED


# --- the wake-up path, end to end ---------------------------------------------------------------------------

@dataclass
class WorkerMapping:
    """Lambda's mapping of the worker function, on this machine: the records the local poller reads from the
    events stream are filtered with the template's FilterCriteria, and only a batch with records left invokes
    the handler."""

    filters: list[dict[str, str]]
    invocations: list[dict[str, Any]] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)  # each invocation's start and end (epoch ms)
    dropped: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, event: dict[str, Any], _context: Any) -> dict[str, Any]:
        delivered = filtered(self.filters, event)
        with self.lock:
            self.dropped += len(event["Records"]) - (len(delivered["Records"]) if delivered else 0)
        if delivered is None:
            return {"batchItemFailures": []}
        started = system_clock()
        response: dict[str, Any] = worker_handler.handler(delivered, LocalLambdaContext("onward-worker"))
        with self.lock:
            self.invocations.append(delivered)
            self.spans.append((started, system_clock()))
        return response

    def invoked_at(self, at: int) -> bool:
        """Whether an invocation was running at `at` (epoch ms)."""
        return any(start <= at <= end for start, end in self.spans)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@pytest.mark.parametrize(("count", "per_s"), [(40, 8.0), (6, 0.5)], ids=["busy", "sparse"])
def test_jobs_submitted_at_a_steady_rate_start_within_the_polls_of_their_wake_ups(
        pipeline, worker_environment, monkeypatch, capsys, count: int, per_s: float) -> None:
    """Jobs of three tenants submitted at a steady rate: 8 a second (invocations overlap, and one still running
    claims jobs before their wake-ups come), or one every 2 s (each invocation has ended before the next job:
    the wake-up path alone). Relay and worker mapping are polled as Lambda polls (4 and 1 times a second).
    Every job starts, woken by its queued event: there is no timer here at all, so a job whose wake-up was
    lost, filtered out or not acted on would never start. The only timing asserted is loose: the slowest start
    is sooner than the backstop's period (what the once-a-minute worker waited on average)."""
    monkeypatch.setenv("ONWARD_WORKER_CONCURRENCY", "4")
    deployment = Deployment.from_environment()
    store = deployment.job_store
    mapping = WorkerMapping(mapping_filters("WorkerFunction", "Wake"))
    poller = EventsStreamPoller(deployment.client("kinesis"), deployment.settings.require("events_stream"),
                                mapping, deployment.checkpoint_store, consumer="local-mapping:worker")
    loops = [BackgroundLoop("relay", pipeline.relay_poller.poll_once, RELAY_POLL_S),
             BackgroundLoop("worker-mapping", poller.poll_once, KINESIS_POLL_S)]
    jobs: list[str] = []
    for loop in loops:
        loop.start()
    try:
        for n in range(count):
            jobs.append(store.create(f"tenant-{n % 3}", NewJob(type="demo.echo", params={"n": n})).job.job_id)
            time.sleep(1 / per_s)
        deadline = time.monotonic() + 120
        while ended(store, jobs) < len(jobs) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        for loop in loops:
            loop.stop()

    assert [store.get(job_id).state for job_id in jobs] == [JobState.SUCCEEDED] * len(jobs)
    latencies_s = [(store.runs(job_id)[0].claimed_at - store.get(job_id).created_at) / 1000 for job_id in jobs]
    woken_for = [json.loads(base64.b64decode(r["kinesis"]["data"]))["job_id"]
                 for event in mapping.invocations for r in event["Records"]]
    with capsys.disabled():
        print(f"\nLambda worker, create-to-start over {len(jobs)} jobs at {per_s:g}/s: "
              f"p50 {statistics.median(latencies_s):.2f} s, p99 {percentile(latencies_s, 0.99):.2f} s, "
              f"max {max(latencies_s):.2f} s; {len(mapping.invocations)} "
              f"invocations for {len(woken_for)} wake-ups ({mapping.dropped} records filtered out); polls every "
              f"{RELAY_POLL_S} s (relay) and {KINESIS_POLL_S} s (worker mapping)")
    # Every job was claimed inside an invocation the mapping made for queued events (not necessarily its own:
    # a running invocation claims on while jobs are due, and the wake-up that comes later finds nothing).
    assert all(mapping.invoked_at(store.runs(job_id)[0].claimed_at) for job_id in jobs)
    assert set(woken_for) <= set(jobs) and len(woken_for) == len(set(woken_for))
    assert all(record_passes(mapping.filters, r) for event in mapping.invocations for r in event["Records"])
    assert mapping.dropped > 0  # the jobs' running and succeeded events reached the mapping, and no invocation
    period = re.fullmatch(r"rate\((\d+) minutes?\)", load_template()["Parameters"]["WorkerSchedule"]["Default"])
    assert period is not None and max(latencies_s) < int(period.group(1)) * 60
