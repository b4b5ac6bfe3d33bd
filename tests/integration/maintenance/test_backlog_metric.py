"""The backlog the worker tasks scale on (onward.maintenance.backlog), counted against the embedded endpoint: exactly
the
waiting jobs due now (not the delayed ones, not those in backoff, not the running ones, but those whose
backoff ended in an entry no claim has woken yet), the running ones apart, in a number of requests that
does not grow with the registered tenants."""

from __future__ import annotations

import json
from typing import Any

import pytest

from onward.domain.backoff import BackoffPolicy
from onward.domain.models import ErrorSummary, NewJob
from onward.domain.states import JobState
from onward.maintenance.backlog import Backlog, BacklogCounter
from onward.settings import Settings
from onward.store.dynamo.backlog_reads import DynamoBacklogReads
from onward.store.dynamo.keys import queue_key
from onward.store.ports.index_shards import LEASE_SHARDS, PARKED_SHARDS
from onward.store.service import JobStore
from tests.support import ManualClock

pytestmark = pytest.mark.integration

LONG_LEASE_S = 3600.0


def entry_item(dynamodb: Any, settings: Settings, tenant_id: str) -> dict[str, Any]:
    key = queue_key(tenant_id, 0)
    item: dict[str, Any] = dynamodb.get_item(TableName=settings.jobs_table, ConsistentRead=True, Key={
        "pk": {"S": key.pk}, "sk": {"S": key.sk}})["Item"]
    return item


def idle_requests(settings: Settings) -> int:
    """A count with no queue holding work: one Query per partition of `active`, `parked` and `leases`."""
    return settings.active_shards + PARKED_SHARDS + LEASE_SHARDS


def test_the_backlog_counts_exactly_the_waiting_jobs_due_now(settings: Settings, dynamodb: Any,
                                                             clock: ManualClock) -> None:
    """Without the not-due count, the delayed jobs of an active entry would count as due (its waiting count
    holds them); without the ended parks, a job whose backoff is over would never count while no worker runs
    (nobody wakes its entry), so the service would never scale from 0 for it; running jobs are not due."""
    store = JobStore(settings, client=dynamodb, clock=clock)
    short_backoff = JobStore(settings, client=dynamodb, clock=clock, backoff=BackoffPolicy(base_s=10, cap_s=10))
    long_backoff = JobStore(settings, client=dynamodb, clock=clock, backoff=BackoffPolicy(base_s=600, cap_s=600))
    counter = BacklogCounter(DynamoBacklogReads(dynamodb, settings.require("jobs_table"), settings.active_shards),
                             clock=clock)

    # running: claimed and held
    for _ in range(2):
        store.create("busy", NewJob(type="demo.echo"))
    running = [store.claim("w-busy", LONG_LEASE_S) for _ in range(2)]
    assert all(lease is not None for lease in running)

    # in backoff (300 to 600 s) and the backoff of one ending in 5 to 10 s: both entries parked by a claim
    backoff_jobs = [store.create("backoff", NewJob(type="demo.flaky")).job.job_id for _ in range(2)]
    wakes_job = store.create("wakes", NewJob(type="demo.flaky")).job.job_id
    leases = {lease.job_id: lease for lease in (store.claim("w-fail", LONG_LEASE_S) for _ in range(3)) if lease}
    assert set(leases) == {*backoff_jobs, wakes_job}
    for job_id in backoff_jobs:
        long_backoff.fail(leases[job_id], ErrorSummary.of("Flaky", "again later"))
    short_backoff.fail(leases[wakes_job], ErrorSummary.of("Flaky", "again soon"))
    assert store.claim("w-idle", LONG_LEASE_S) is None  # nothing due: the claim parks both entries
    assert "parked_pk" in entry_item(dynamodb, settings, "backoff")
    assert "parked_pk" in entry_item(dynamodb, settings, "wakes")

    # due now in two priority bands, beside delayed jobs of the same entry; a tenant with only delayed jobs
    for priority in (0, 0, 0, 5):
        store.create("ready", NewJob(type="demo.echo", priority=priority))
    for _ in range(2):
        store.create("ready", NewJob(type="demo.echo", delay_s=600.0))
    store.create("later", NewJob(type="demo.echo", delay_s=300.0))

    clock.advance(20)  # the short backoff is over; no claim runs, so the entry stays parked
    assert "parked_pk" in entry_item(dynamodb, settings, "wakes")
    assert store.get(wakes_job).state is JobState.RETRY_WAIT

    backlog = counter.count()

    assert (backlog.due, backlog.running) == (4 + 1, 2)
    # Queries per band with work: ready's two bands, later's, wakes's; one BatchGetItem for the entries
    assert backlog.requests == idle_requests(settings) + 1 + 4


def test_the_count_costs_the_same_however_many_tenants_are_registered(settings: Settings, dynamodb: Any,
                                                                       clock: ManualClock) -> None:
    """Were the count to read every registered tenant (the registry, or each tenant's entries), tenants
    whose jobs are all done would add requests here."""
    store = JobStore(settings, client=dynamodb, clock=clock)
    counter = BacklogCounter(DynamoBacklogReads(dynamodb, settings.require("jobs_table"), settings.active_shards),
                             clock=clock)
    assert counter.count() == Backlog(0, 0, idle_requests(settings))

    for n in range(20):
        store.create(f"done-{n}", NewJob(type="demo.echo"))
        lease = store.claim("w", LONG_LEASE_S)
        assert lease is not None
        store.complete(lease, {"ok": True})

    backlog = counter.count()
    assert (backlog.due, backlog.running, backlog.requests) == (0, 0, idle_requests(settings))


def test_the_reaper_publishes_the_counts_the_scaling_alarm_reads(stack_environment: dict[str, str],
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The reaper's Lambda handler with Powertools metrics on: its EMF output holds BacklogDue and JobsRunning
    with the counts, under the namespace and dimensions EcsWorkerDemandAlarm reads. A renamed metric or
    another service dimension would leave the alarm without data: the worker tasks would never scale."""
    from onward.bootstrap import Deployment
    from onward.entrypoints import reaper as reaper_app
    from onward_infra.lambda_context import LocalLambdaContext
    from onward_infra.template import load_template

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    store = Deployment.from_environment().job_store
    for _ in range(3):
        store.create("acme", NewJob(type="demo.echo"))
    assert store.claim("w-busy", LONG_LEASE_S) is not None

    reaper_app.handler({"source": "aws.events", "detail-type": "Scheduled Event", "detail": {}},
                       LocalLambdaContext("reaper"))

    published: dict[tuple[str, str, tuple[tuple[str, str], ...]], Any] = {}
    for line in capsys.readouterr().out.splitlines():
        if not (line.startswith("{") and '"_aws"' in line):
            continue
        document = json.loads(line)
        for directive in document["_aws"]["CloudWatchMetrics"]:
            dimensions = tuple(sorted((name, document[name]) for name in directive["Dimensions"][0]))
            for metric in directive["Metrics"]:
                published[(directive["Namespace"], metric["Name"], dimensions)] = document[metric["Name"]]
    alarm = load_template()["Resources"]["EcsWorkerDemandAlarm"]["Properties"]
    read = {query["Id"]: query["MetricStat"]["Metric"] for query in alarm["Metrics"] if "MetricStat" in query}
    values = {query_id: published[(metric["Namespace"], metric["MetricName"],
                                   tuple(sorted((d["Name"], d["Value"]) for d in metric["Dimensions"])))]
              for query_id, metric in read.items()}
    assert values == {"due": [2.0], "running": [1.0]}  # one value each (EMF lists them)
