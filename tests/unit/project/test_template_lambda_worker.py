"""The Lambda worker in template.yaml (WorkerRuntime=lambda), checked offline on the template and its SAM
translation: woken by the events stream's `queued` events through a filtered event-source mapping, with a
backstop schedule for what becomes due with no event, its invocations bounded by reserved concurrency.

The filter is evaluated in Python (tests/lambda_filters.py: Lambda's Kinesis filtering, moto's pattern
matcher) against real events: every transition a job can make, run on the in-memory store and encoded as the
relay puts them on the stream, plus a pipeline heartbeat and data that is not JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from onward.bootstrap import MAX_WORKER_CONCURRENCY
from onward.domain.models import ErrorSummary, NewJob, OutboxEvent
from onward.domain.states import JobState
from onward.pipeline.heartbeats import Heartbeat, encode_heartbeat
from onward.pipeline.relay.publisher import encode
from onward.store.service import JobStore
from onward_infra.template import load_template
from tests.lambda_filters import data_passes, mapping_filters
from tests.samtemplate import translate
from tests.support import ManualClock

TEMPLATE = load_template()
RESOURCES: dict[str, Any] = TEMPLATE["Resources"]
PARAMETERS: dict[str, Any] = TEMPLATE["Parameters"]
WORKER_EVENTS: dict[str, Any] = RESOURCES["WorkerFunction"]["Properties"]["Events"]


@pytest.fixture(scope="module")
def translated() -> dict[str, Any]:
    return translate()["Resources"]


def worker_mapping(translated: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    found = [(name, r) for name, r in translated.items() if r["Type"] == "AWS::Lambda::EventSourceMapping"
             and r["Properties"]["FunctionName"] == {"Ref": "WorkerFunction"}]
    assert len(found) == 1, found
    return found[0]


# --- which events wake the worker ------------------------------------------------------------------------------

def job_histories() -> dict[str, list[OutboxEvent]]:
    """The events of jobs taken through every transition on the in-memory store, by what happened to them.
    Each claim is made while its job is the only one due."""
    clock = ManualClock()
    store = JobStore.in_memory(clock=clock)

    def create(**fields: Any) -> str:
        return store.create("acme", NewJob(type="demo.echo", **fields)).job.job_id

    def claim(job_id: str, lease_s: float = 30) -> Any:
        lease = store.claim("w-1", lease_s)
        assert lease is not None and lease.job_id == job_id
        return lease

    retried = create()
    store.fail(claim(retried), ErrorSummary.of("RuntimeError", "once"))
    clock.advance(3600)  # the backoff ends: nothing is written, the job is simply due again
    store.complete(claim(retried), {"ok": True})

    handed_back = create(max_attempts=5)
    claim(handed_back, lease_s=1)
    clock.advance(5)
    assert [job.job_id for job in store.reap()] == [handed_back]  # the reaper: lease lapsed -> queued
    store.release(claim(handed_back))  # a graceful stop
    store.fail(claim(handed_back), ErrorSummary.of("ValueError", "bad"), permanent=True)  # -> dead

    cancelled_waiting = create()
    store.cancel(cancelled_waiting, "acme")

    cancelled_running = create()
    lease = claim(cancelled_running)
    store.cancel(cancelled_running, "acme")  # running, cancel requested
    store.acknowledge_cancel(lease)

    quarantined = create(max_attempts=1)
    claim(quarantined, lease_s=1)
    clock.advance(5)
    store.reap()

    # Last, so that no claim above can take them: one job is due (replayed), the other not before its run_at.
    store.replay(handed_back)  # dead -> queued
    delayed = create(delay_s=600)

    names = {"retried": retried, "delayed": delayed, "handed_back": handed_back,
             "cancelled_waiting": cancelled_waiting, "cancelled_running": cancelled_running,
             "quarantined": quarantined}
    return {name: store.events(job_id) for name, job_id in names.items()}


def test_the_histories_cover_every_state_and_every_way_into_the_queue() -> None:
    """The filter test below is only as good as the events it sees: every status, and each transition that
    (re)queues a job (created, delayed, handed back by the reaper, released, replayed)."""
    histories = job_histories()
    assert {e.status for events in histories.values() for e in events} == set(JobState)
    assert [e.status.value for e in histories["handed_back"]] == [
        "queued", "running", "queued", "running", "queued", "running", "dead", "queued"]
    assert [e.status.value for e in histories["retried"]] == ["queued", "running", "retry_wait", "running",
                                                              "succeeded"]
    assert any(e.cancel_requested for e in histories["cancelled_running"])


def test_the_filter_passes_exactly_the_queued_events() -> None:
    """Every `queued` event wakes the worker (a job that can be claimed now, or at its run_at for a delayed
    one); nothing else does: a running, retry_wait or ended job is nothing to claim, and heartbeats (one per
    shard per minute) or foreign data would only cost invocations. A pattern on another field, or none, fails."""
    filters = mapping_filters("WorkerFunction", "Wake")
    for name, events in job_histories().items():
        for event in events:
            assert data_passes(filters, encode(event)) == (event.status is JobState.QUEUED), (name, event)
    beat = Heartbeat(slots=4, through={"0": 1_800_000_000_000}, occurred_at="2027-01-15T08:00:00Z")
    assert not data_passes(filters, encode_heartbeat(beat))
    assert not data_passes(filters, b"Hello, this is a test 123.")  # the SAM sample's data: not JSON


def test_a_retry_and_a_delayed_job_become_due_with_no_event_so_a_backstop_schedule_claims_them() -> None:
    """The end of a retry's backoff and a delayed job's run_at write nothing (the claim moves retry_wait ->
    running directly; a delayed job's only event is its creation, sent when it is not yet due): no wake-up
    can come for them. Without the schedule they would wait for some other job's wake-up, forever when idle."""
    histories = job_histories()
    retried = [e.status for e in histories["retried"]]
    assert retried[retried.index(JobState.RETRY_WAIT) + 1] is JobState.RUNNING
    assert [e.status for e in histories["delayed"]] == [JobState.QUEUED]
    schedules = {name: e for name, e in WORKER_EVENTS.items() if e["Type"] == "Schedule"}
    assert [e["Properties"]["Schedule"] for e in schedules.values()] == [{"Ref": "WorkerSchedule"}]
    period = re.fullmatch(r"rate\((\d+) minutes?\)", PARAMETERS["WorkerSchedule"]["Default"])
    assert period is not None and int(period.group(1)) == 1  # the finest an EventBridge rate goes
    # Its invocations are the same handler: the scheduled event has no Records (answered {"ran": n}).


# --- the mapping -------------------------------------------------------------------------------------------------

def test_the_mapping_and_the_backstop_exist_only_when_the_worker_runtime_is_lambda(translated) -> None:
    """With WorkerRuntime=ecs or none, a mapping left unconditioned would invoke a function that does not exist
    (the stack fails), and an extra consumer would read every shard of the events stream."""
    name, mapping = worker_mapping(translated)
    assert mapping.get("Condition") == "WorkerOnLambda"
    rules = [r for r in translated.values() if r["Type"] == "AWS::Events::Rule"
             and r["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": ["WorkerFunction", "Arn"]}]
    assert len(rules) == 1 and rules[0].get("Condition") == "WorkerOnLambda"
    conditional = {n for n, r in translated.items() if r.get("Condition") == "WorkerOnLambda"}
    assert {name, "WorkerFunction", "WorkerRole", "WorkerLogGroup"} <= conditional
    assert TEMPLATE["Conditions"]["WorkerOnLambda"] == {"Fn::Equals": [{"Ref": "WorkerRuntime"}, "lambda"]}


def test_the_mapping_wakes_within_a_poll_of_the_queued_event(translated) -> None:
    """About a second from the event to an invocation: no batching window (a window waits for it to fill),
    a few invocations per shard (the stream's sizing tier says how many), wake-ups of the past not replayed,
    batch failures only per invocation."""
    _, mapping = worker_mapping(translated)
    properties = mapping["Properties"]
    assert properties["EventSourceArn"] == {"Fn::GetAtt": ["EventsStream", "Arn"]}
    assert [json.loads(f["Pattern"]) for f in properties["FilterCriteria"]["Filters"]] == [
        {"data": {"status": ["queued"]}}]
    assert properties["MaximumBatchingWindowInSeconds"] == 0
    assert "EventsStreamSizing" in json.dumps(properties["ParallelizationFactor"])  # test_template_stream_sizing.py
    assert properties["StartingPosition"] == "LATEST"
    assert properties["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # A wake-up is dropped after a few retries or a minute (the backstop's period): it would only wake an
    # invocation for jobs claimed since, and it would hold back its slot of the shard meanwhile.
    assert properties["MaximumRetryAttempts"] <= 3
    assert properties["MaximumRecordAgeInSeconds"] == 60
    assert "DestinationConfig" not in properties  # nothing to re-drive: a lost wake-up is the backstop's
    assert not properties.get("BisectBatchOnFunctionError", False)


def test_reserved_concurrency_follows_the_target_and_jobs_per_invocation_the_parameter(translated) -> None:
    """Unbounded, a burst of queued events would scale workers (shards x invocations per shard) into the
    account's concurrency that the API, relay and projector need; the per-invocation threads must be what was
    deployed. The reservation's value per stream mode is tests/unit/project/test_template_stream_sizing.py's."""
    function = translated["WorkerFunction"]["Properties"]
    assert "EventsStreamSizing" in json.dumps(function["ReservedConcurrentExecutions"])
    assert function["Environment"]["Variables"]["ONWARD_WORKER_CONCURRENCY"] == {
        "Ref": "LambdaWorkerConcurrencyPerInvocation"}
    assert function["Timeout"] == 900  # the claims stop a lease before it
    per_invocation = PARAMETERS["LambdaWorkerConcurrencyPerInvocation"]
    assert 1 <= per_invocation["MinValue"] <= per_invocation["Default"] <= per_invocation["MaxValue"]
    assert per_invocation["MaxValue"] <= MAX_WORKER_CONCURRENCY  # what the code accepts (onward.bootstrap)


def test_the_worker_role_reads_the_events_stream_for_its_mapping_only() -> None:
    """The mapping's poller uses the function's role: without these reads the mapping never starts; the
    grants are on the events stream alone (test_template_policies.py checks the role as a whole)."""
    policies = {p["PolicyName"]: p["PolicyDocument"] for p in RESOURCES["WorkerRole"]["Properties"]["Policies"]}
    statements = policies["event-source"]["Statement"]
    assert len(statements) == 1 and statements[0]["Resource"] == {"Fn::GetAtt": ["EventsStream", "Arn"]}
    assert set(statements[0]["Action"]) == {"kinesis:DescribeStream", "kinesis:DescribeStreamSummary",
                                            "kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:ListShards"}
