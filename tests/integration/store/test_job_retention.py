"""The job retention on the embedded endpoint, whose TTL sweeper deletes as DynamoDB does
(infra/onward_infra/moto_fixes/
retention.py; driven by hand "in the future" with `sweep_retention(at=...)`, as tests/integration/
test_retention.py does): an ended job's items and view row carry `expires_at` at the right values and go after
the retention, a job that has not ended carries none on its rows and stays (its view row expires only after
the live horizon), and the stack's JobRetentionDays (here 3 days,
not the default 30, through ONWARD_JOB_RETENTION_DAYS as the template passes it) is what the writers stamp.

The rules item by item (pure) are tests/unit/store/test_job_retention.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from onward.bootstrap import Deployment
from onward.domain.clock import epoch_ms
from onward.domain.models import ErrorSummary, NewJob
from onward.settings import DEFAULT_OUTBOX_RETENTION_DAYS, Settings
from onward.store.dynamo.attributes import from_item
from onward.store.service import JobStore
from onward_infra.endpoint import EmbeddedEndpoint
from tests.integration.api_support import http_call, serve_api
from tests.integration.pipeline.test_retention import HOUR_S, Stack

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]

DAYS = 3
RETENTION_S = DAYS * 86_400
LIVE_S = DEFAULT_OUTBOX_RETENTION_DAYS * 86_400 + RETENTION_S  # a live job's view row: the live horizon
TOKENS = {"acme": "acme-secret"}
FLAKY = NewJob(type="demo.echo", params={"n": 1}, max_attempts=2)


@pytest.fixture(scope="module")
def retention_endpoint() -> Iterator[EmbeddedEndpoint]:
    """An endpoint of this module's own with AWS's retention periods (the tests' shared one has none)."""
    with EmbeddedEndpoint(retention_scale=1.0) as running:
        yield running


class RetainingStack(Stack):
    """test_retention's Stack, deployed with JobRetentionDays = DAYS: its environment carries
    ONWARD_JOB_RETENTION_DAYS (as the template sets it for every function), and so do its store, its
    pipeline and the handlers (Deployment.from_environment)."""

    def __init__(self, endpoint: EmbeddedEndpoint, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__(endpoint, monkeypatch)
        self.environment = {**self.environment, "ONWARD_JOB_RETENTION_DAYS": str(DAYS)}
        monkeypatch.setenv("ONWARD_JOB_RETENTION_DAYS", str(DAYS))
        self.settings = Settings.from_environment(self.environment)
        self.store = JobStore(self.settings, client=self.dynamodb, clock=self.clock)

    def items(self, table: str | None) -> list[dict[str, Any]]:
        pages = self.dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
        return [from_item(item) for page in pages for item in page["Items"]]

    def job_items(self, job_id: str) -> dict[str, dict[str, Any]]:
        """The job's items of the jobs table by sort key (JOB, RUN#..., RESULT)."""
        return {item["sk"]: item for item in self.items(self.settings.jobs_table) if item["pk"] == f"JOB#{job_id}"}

    def idempotency_item(self, key: str) -> dict[str, Any] | None:
        found = self.dynamodb.get_item(TableName=self.settings.jobs_table, ConsistentRead=True,
                                       Key={"pk": {"S": f"IDEM#acme#{key}"}, "sk": {"S": "IDEM"}}).get("Item")
        return None if found is None else from_item(found)

    def view_row(self, job_id: str) -> dict[str, Any] | None:
        found = self.dynamodb.get_item(TableName=self.settings.status_table, ConsistentRead=True,
                                       Key={"job_id": {"S": job_id}}).get("Item")
        return None if found is None else from_item(found)


@pytest.fixture
def stack(retention_endpoint: EmbeddedEndpoint, monkeypatch: pytest.MonkeyPatch) -> RetainingStack:
    return RetainingStack(retention_endpoint, monkeypatch)


def _ended(at_ms: int) -> int:
    return at_ms // 1000 + RETENTION_S


def test_an_ended_job_goes_after_the_retention_and_a_queued_or_running_one_stays(stack, monkeypatch):
    """A job run to its end (a failed attempt, then a successful one) has `expires_at` on its row, both runs,
    its result, its Idempotency-Key and its view row, each at its rule's value; a queued and a running job
    have none on their rows, the running attempt none on its run record. A sweep a second before the first
    of them is due deletes nothing; one past the retention deletes every item of the ended job and its view
    row (the API then answers 404), while the queued and the running jobs stay, rows and view rows.

    Without the terminal-only rule the queued and the running job would expire and be lost (a worker's job
    deleted under it); without the stamps the ended job would be kept forever; without the setting threaded
    through, the TTLs would be 30 days from the end, not 3; without the view's TTL the API would keep showing
    a job whose rows are gone; without `expires_at` among the storage-only attributes the API's reads of the
    ended job (its status, its runs) would fail on a field the models refuse."""
    store, clock = stack.store, stack.clock
    done = store.create("acme", FLAKY, idempotency_key="order-1").job
    clock.advance(1)
    first = store.claim("w1", 30)
    assert first is not None and first.job_id == done.job_id
    clock.advance(1)
    store.fail(first, ErrorSummary.of("Flaky", "once"))
    failed_at = clock.now
    clock.advance(2)  # past the retry delay (at most 1 s after a first attempt)
    second = store.claim("w1", 30)
    assert second is not None and second.job_id == done.job_id
    clock.advance(1)
    ended = store.complete(second, {"rows": 3}).job
    clock.advance(1)
    live = store.create("acme", NewJob(type="demo.echo")).job
    clock.advance(1)
    running = store.claim("w2", 30)
    assert running is not None and running.job_id == live.job_id
    clock.advance(1)
    waiting = store.create("acme", NewJob(type="demo.echo"), idempotency_key="order-2").job
    pipeline = stack.pipeline()
    pipeline.drain()

    items = stack.job_items(done.job_id)
    assert set(items) == {"JOB", "RUN#000001", "RUN#000002"}  # (the result on the last run record: issue 34)
    assert items["JOB"]["expires_at"] == _ended(ended.updated_at)
    assert items["RUN#000001"]["expires_at"] == _ended(failed_at)
    assert items["RUN#000002"]["expires_at"] == _ended(ended.updated_at), "the last attempt ended with the job"
    assert items["RUN#000002"]["result"] == {"rows": 3}, "its result kept as long as the row"
    key = stack.idempotency_item("order-1")
    assert key is not None and key["expires_at"] == _ended(done.created_at)
    view = stack.view_row(done.job_id)
    assert view is not None and view["status"] == "succeeded"
    assert view["expires_at"] == epoch_ms(view["committed_at"] or view["occurred_at"]) // 1000 + RETENTION_S

    for job_id, status in ((live.job_id, "running"), (waiting.job_id, "queued")):
        rows = stack.job_items(job_id)
        assert rows["JOB"]["state"] == status and "expires_at" not in rows["JOB"]
        assert all("expires_at" not in run for sk, run in rows.items() if sk.startswith("RUN#"))
        shown = stack.view_row(job_id)
        assert shown is not None and shown["status"] == status
        # a live job's view row expires after the live horizon (outbox + longest job retention), not its own
        assert shown["expires_at"] == epoch_ms(shown["committed_at"] or shown["occurred_at"]) // 1000 + LIVE_S
    live_items = stack.job_items(live.job_id)
    assert "RUN#000001" not in live_items and "run_claimed_at" in live_items["JOB"], \
        "the running attempt is its row's (issue 34), which has no TTL"

    with serve_api(monkeypatch, TOKENS, "operator-secret") as url:
        for path in (f"/jobs/{done.job_id}", f"/jobs/{done.job_id}/runs"):
            answer = http_call(url, "GET", path, token=TOKENS["acme"])
            assert answer.status == 200 and '"expires_at"' not in json.dumps(answer.body), path

        first_due = min(item["expires_at"] for item in items.values())
        stack.endpoint.sweep_retention(at=first_due - 1)
        assert set(stack.job_items(done.job_id)) == set(items) and stack.view_row(done.job_id) is not None

        stack.endpoint.sweep_retention(at=time.time() + RETENTION_S + HOUR_S)
        assert stack.job_items(done.job_id) == {} and stack.idempotency_item("order-1") is None
        assert stack.view_row(done.job_id) is None
        assert http_call(url, "GET", f"/jobs/{done.job_id}", token=TOKENS["acme"]).status == 404
        for job_id, status in ((live.job_id, "running"), (waiting.job_id, "queued")):
            assert stack.job_items(job_id)["JOB"]["state"] == status
            view = stack.view_row(job_id)
            assert view is not None and view["status"] == status
            shown = http_call(url, "GET", f"/jobs/{job_id}", token=TOKENS["acme"])
            assert shown.status == 200 and shown.body["status"] == status
    # The Idempotency-Key's window is the retention from the create, whether or not the job has ended.
    assert stack.idempotency_item("order-2") is None
    assert store.get(running.job_id).state.value == "running"


def test_a_replayed_job_loses_the_ttl_of_its_first_end_on_its_row_and_its_view_row(stack):
    """Terminal states are left by an operator's replay only: the replay's row update removes `expires_at`,
    and its `queued` view row replaces the dead one whole, without it. Without that a replayed job would be
    deleted at its first end's time + the retention while queued again (its row and its status gone).
    Its first attempt's run record keeps its own TTL: a record is kept the retention after its attempt ended."""
    store, clock = stack.store, stack.clock
    job_id = store.create("acme", NewJob(type="demo.echo", max_attempts=1)).job.job_id
    clock.advance(1)
    lease = store.claim("w1", 30)
    assert lease is not None
    clock.advance(1)
    assert store.fail(lease, ErrorSummary.of("Bad", "input"), permanent=True).job.state.value == "dead"
    pipeline = stack.pipeline()
    pipeline.drain()
    dead_row = stack.job_items(job_id)["JOB"]
    dead_view = stack.view_row(job_id)
    assert dead_view is not None and "expires_at" in dead_view and "expires_at" in dead_row

    clock.advance(1)
    store.replay(job_id)
    pipeline.drain()
    items = stack.job_items(job_id)
    assert items["JOB"]["state"] == "queued" and "expires_at" not in items["JOB"]
    view = stack.view_row(job_id)
    assert view is not None and view["status"] == "queued"
    assert view["expires_at"] == epoch_ms(view["committed_at"] or view["occurred_at"]) // 1000 + LIVE_S

    stack.endpoint.sweep_retention(at=time.time() + RETENTION_S + HOUR_S)
    assert set(stack.job_items(job_id)) == {"JOB"}, "the row stays; the ended attempt's record went"
    view = stack.view_row(job_id)
    assert view is not None and view["status"] == "queued"


def test_kept_conflicts_and_parked_records_go_after_the_retention(stack):
    """The projector's conflicts and the parked records of both consumers are written by the Lambda
    functions' Deployment (onward/bootstrap.py) with the stack's retention: without the TTL on them (and
    on their tables) every conflict and every unreadable record would be kept forever."""
    store, clock = stack.store, stack.clock
    job_id = store.create("acme", NewJob(type="demo.echo")).job.job_id
    clock.advance(1)
    (event,) = store.events(job_id)
    deployment = Deployment.from_environment()
    assert deployment.settings.job_retention_days == DAYS
    projector = deployment.status_projector
    projector.project(event)
    assert projector.project(event.model_copy(update={"attempt": 7})).value == "conflict"
    deployment.parked_records.park("relay", "shard-1", "12345", b"\xff not JSON", "not JSON")
    written = time.time()

    conflicts = stack.items(stack.settings.conflicts_table)
    parked = stack.items(stack.settings.parked_table)
    assert len(conflicts) == len(parked) == 1
    for item, at in ((conflicts[0], "detected_at"), (parked[0], "parked_at")):
        assert item["expires_at"] == epoch_ms(item[at]) // 1000 + RETENTION_S
        assert abs(item["expires_at"] - (written + RETENTION_S)) < 60

    stack.endpoint.sweep_retention(at=written + RETENTION_S - HOUR_S)
    assert len(stack.items(stack.settings.conflicts_table)) == len(stack.items(stack.settings.parked_table)) == 1
    stack.endpoint.sweep_retention(at=written + RETENTION_S + HOUR_S)
    assert stack.items(stack.settings.conflicts_table) == stack.items(stack.settings.parked_table) == []
    assert stack.view_row(job_id) is not None, "a queued job's view row stays"


def test_a_scaled_local_stack_expires_a_one_day_job_in_about_17_seconds():
    """`onward up --job-retention-days 1 --retention-scale 0.0002` (issue 36): the endpoint scales each TTL it
    honours (an item lives `scale` times the time from its write to its `expires_at`), so the product keeps
    writing real days and knows no scale; its sweeper runs every 0.05 s at that scale, well within the
    17 s. Without the scaling on TTLs a finished job would be kept a real day; with a sweeper at its scale-1
    period (60 s) it would go a minute late."""
    from onward_infra.moto_fixes.retention import RetentionPolicy as EndpointRetention

    endpoint = EndpointRetention(0.0002)
    written_at = 1_800_000_000.0
    lives_s = endpoint.expires_at(written_at, written_at + 1 * 86_400) - written_at
    assert 17 <= lives_s <= 18 and endpoint.sweep_period_s <= 0.05
