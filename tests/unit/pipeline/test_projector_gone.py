"""The projector's check for gone jobs (onward/pipeline/projector/gone.py): only jobs whose newest event is
older than the policy's shortest retention are looked up, in one BatchGetItem per batch, and a job absent or
past its TTL gets no view row; and the live horizon of a view row (onward/domain/projection.py)."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from onward.domain import lifecycle
from onward.domain.clock import iso
from onward.domain.models import NewJob, OutboxEvent
from onward.domain.projection import live_view_horizon_s, view_expires_at
from onward.domain.retention import RetentionPolicy
from onward.pipeline.projector.projector import BatchTally, ShardRecord, StatusProjector
from onward.store.dynamo.attributes import from_item
from tests.support import ManualClock

NOW = 1_800_000_000_000
RETENTION_S = 600
POLICY = RetentionPolicy.uniform(RETENTION_S)


class Tables:
    """A DynamoDB stand-in: the view's puts (never refused), and BatchGetItem over `rows` (job id -> its
    `expires_at` or None), counting the requests."""

    def __init__(self, rows: dict[str, int | None]) -> None:
        self.rows = rows
        self.puts: list[dict[str, Any]] = []
        self.batch_gets: list[dict[str, Any]] = []

    def put_item(self, **request: Any) -> dict[str, Any]:
        if request["TableName"] != "status":
            raise ClientError({"Error": {"Code": "Unexpected"}}, "PutItem")
        self.puts.append(from_item(request["Item"]))
        return {}

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:  # noqa: N803 - boto3's name
        self.batch_gets.append(RequestItems)
        (request,) = RequestItems.values()
        found = []
        for key in request["Keys"]:
            job_id = key["pk"]["S"].removeprefix("JOB#")
            if job_id in self.rows:
                expires = self.rows[job_id]
                found.append({"pk": key["pk"], "version": {"N": "3"},
                              **({} if expires is None else {"expires_at": {"N": str(expires)}})})
        return {"Responses": {"jobs": found}}


def event(job_id: str, at_ms: int) -> OutboxEvent:
    return OutboxEvent.of(lifecycle.create(job_id, "acme", NewJob(type="demo.echo"), at_ms).after).model_copy(
        update={"committed_at": iso(at_ms)})


def project(tables: Tables, events: list[OutboxEvent]) -> BatchTally:
    projector = StatusProjector(tables, "status", "conflicts", checkpoints=None, parked=None,  # type: ignore[arg-type]
                                clock=ManualClock(NOW), policy=POLICY, outbox_retention_s=7 * 86_400,
                                jobs_table="jobs")
    tally = BatchTally()
    records = [ShardRecord(str(n), json.dumps(e.model_dump(mode="json", by_alias=True)).encode())
               for n, e in enumerate(events)]
    assert projector.project_batch("shard-a", records, tally) is None
    return tally


def test_fresh_events_cost_no_read():
    """Without the freshness rule every batch would cost a BatchGetItem (tests/integration pins requests per
    job: test_requests_per_job)."""
    tables = Tables({})
    tally = project(tables, [event(f"{n:032x}", NOW - RETENTION_S * 1000 + 1_000) for n in range(3)])
    assert tables.batch_gets == [] and len(tables.puts) == 3 and tally.gone == 0


def test_old_events_are_looked_up_in_one_read_and_gone_jobs_get_no_row():
    """Without the check a replay would write rows for the deleted job and for the one past its TTL (which
    DynamoDB may still return for up to days); the live job's row is written."""
    old = NOW - 2 * RETENTION_S * 1000
    deleted, expired, live = "a" * 32, "b" * 32, "c" * 32
    tables = Tables({expired: NOW // 1000 - 1, live: None})
    tally = project(tables, [event(deleted, old), event(expired, old), event(live, old)])
    assert len(tables.batch_gets) == 1
    (request,) = tables.batch_gets[0].values()
    assert len(request["Keys"]) == 3 and request["ProjectionExpression"] == "pk, version, expires_at"
    assert [put["job_id"] for put in tables.puts] == [live] and tally.gone == 2


def test_a_replayed_event_is_looked_up_however_fresh_it_looks():
    """`onward replay` re-publishes from the outbox without `committed_at`. On a local stack whose TTLs the
    endpoint scales (`--retention-scale`), a job is deleted seconds after it ended while its events look a few
    seconds old; without this rule such a replay would bring the deleted job's row back."""
    deleted, live = "e" * 32, "f" * 32
    fresh = NOW - 1_000
    replayed = [event(job_id, fresh).model_copy(update={"committed_at": None}) for job_id in (deleted, live)]
    tables = Tables({live: None})
    tally = project(tables, replayed)
    assert len(tables.batch_gets) == 1 and [put["job_id"] for put in tables.puts] == [live] and tally.gone == 1


def test_a_live_rows_horizon_counts_from_its_run_at_when_later():
    """Without run_at a job delayed past the horizon would lose its view row while it waits."""
    horizon = live_view_horizon_s(POLICY, 7 * 86_400)
    assert horizon == 7 * 86_400 + RETENTION_S
    queued = event("d" * 32, NOW)
    later = queued.model_copy(update={"run_at": iso(NOW + 300 * 86_400_000)})
    assert view_expires_at(queued, POLICY, horizon) == NOW // 1000 + horizon
    assert view_expires_at(later, POLICY, horizon) == (NOW + 300 * 86_400_000) // 1000 + horizon
