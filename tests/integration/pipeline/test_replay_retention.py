"""The replay defect (issue 36), end to end on the embedded endpoint: a job finishes, its items and its view
row expire (the endpoint's TTL sweep, as DynamoDB's), its events stay in the outbox (kept longer), and
`onward replay` of its window re-publishes them. The projector (onward/pipeline/projector/gone.py) sees
events older than the policy's shortest retention, looks the job up, finds it gone and writes no view row;
a live job's old events are looked up too, found, and projected as ever. Replay itself re-publishes every
event of the window: the projector is what decides (onward/pipeline/relay/replay.py).

The retention policy here is in seconds (5 s for every outcome) so that the test waits for real time
instead of moving the projector's clock."""

from __future__ import annotations

import json
import time

import pytest

from onward.bootstrap import Deployment
from onward.domain.clock import epoch_ms, system_clock
from onward.domain.models import NewJob
from onward.entrypoints import projector as projector_handler
from onward.pipeline.relay.replay import ReplaySelection, replay
from onward.settings import Settings
from onward.store.service import JobStore
from tests.integration.pipeline.test_retention import Stack
from tests.integration.store.test_job_retention import RetainingStack, retention_endpoint  # noqa: F401
from tests.support import ManualClock

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]

RETENTION_S = 5
OUTCOMES = ("succeeded", "cancelled", "dead", "quarantined")
POLICY = json.dumps({"unit": "seconds", "default": dict.fromkeys(OUTCOMES, RETENTION_S)})


class PolicyStack(RetainingStack):
    """A stack deployed with a RetentionPolicy of RETENTION_S seconds for every outcome (the environment the
    template gives every function: the store's, the pipeline's and the handlers' Deployment read it)."""

    def __init__(self, endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
        Stack.__init__(self, endpoint, monkeypatch)
        self.environment = {**self.environment, "ONWARD_RETENTION_POLICY": POLICY}
        monkeypatch.setenv("ONWARD_RETENTION_POLICY", POLICY)
        self.settings = Settings.from_environment(self.environment)
        # Behind the real clock (the relay recovers the outbox up to the real now) by less than the base
        # stack's minute: the events must be fresher than the 5 s retention when first projected.
        self.clock = ManualClock(system_clock() - 3_000)
        self.store = JobStore(self.settings, client=self.dynamodb, clock=self.clock)


def _wait_past(at_ms: int) -> None:
    while system_clock() <= at_ms:
        time.sleep(0.2)


def test_a_replay_of_a_deleted_jobs_window_brings_no_view_row_back(retention_endpoint, monkeypatch):  # noqa: F811
    """Without the projector's check the replay of the window up to the job's `running` event would write a
    `running` view row for a job deleted for good (and, before every view row expired, it would stay so for
    ever); without the freshness rule every batch would cost a read, and the first projection (fresh events)
    would count as looked up. The live job's old events are projected: the check skips only gone jobs."""
    stack = PolicyStack(retention_endpoint, monkeypatch)
    store, clock = stack.store, stack.clock
    done = store.create("acme", NewJob(type="demo.echo")).job
    clock.advance(1)
    lease = store.claim("w1", 30)
    assert lease is not None and lease.job_id == done.job_id
    running_at = clock.now
    clock.advance(1)
    ended = store.complete(lease, {"ok": True}).job
    clock.advance(1)
    live = store.create("acme", NewJob(type="demo.echo")).job
    pipeline = stack.pipeline()
    before = projector_handler.totals.snapshot()
    pipeline.drain()
    assert projector_handler.totals.snapshot()["gone"] == before["gone"], "fresh events: nothing looked up"
    view = stack.view_row(done.job_id)
    assert view is not None and view["status"] == "succeeded"
    live_view = stack.view_row(live.job_id)
    assert live_view is not None and live_view["status"] == "queued" and "expires_at" in live_view

    items = stack.job_items(done.job_id)
    assert {item["expires_at"] for item in items.values()} == {ended.updated_at // 1000 + RETENTION_S}
    assert view["expires_at"] == epoch_ms(view["committed_at"] or view["occurred_at"]) // 1000 + RETENTION_S
    _wait_past(max(view["expires_at"], *(item["expires_at"] for item in items.values())) * 1000 + 100)
    stack.endpoint.sweep_retention(at=time.time() + 1)  # a second on: the sweep's own clock is not ours
    assert stack.job_items(done.job_id) == {} and stack.view_row(done.job_id) is None
    assert set(stack.job_items(live.job_id)) == {"JOB"}, "a live job never expires"

    deployment = Deployment(stack.settings, clients={"dynamodb": stack.dynamodb,
                                                     "kinesis": stack.endpoint.client("kinesis")})
    early = replay(deployment.outbox_reader, deployment.events_publisher,
                   ReplaySelection(tenant_id="acme", since=done.created_at, until=running_at))
    assert early.published == early.selected == 2  # the job's queued and running events
    before = projector_handler.totals.snapshot()
    pipeline.drain()
    assert projector_handler.totals.snapshot()["gone"] - before["gone"] == 2
    assert stack.view_row(done.job_id) is None, "no view row for a job that is gone"

    whole = replay(deployment.outbox_reader, deployment.events_publisher,
                   ReplaySelection(tenant_id="acme", since=done.created_at, until=clock.now))
    assert whole.selected == 4  # three of the gone job's, the live job's one
    before = projector_handler.totals.snapshot()
    pipeline.drain()
    after = projector_handler.totals.snapshot()
    assert after["gone"] - before["gone"] == 3 and after["duplicate"] - before["duplicate"] == 1
    assert stack.view_row(done.job_id) is None
    assert stack.view_row(live.job_id) == live_view
