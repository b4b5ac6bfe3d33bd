"""Tag entries expire with their view row (onward/pipeline/tag_index.py): the projector writes each entry with
its row's `expires_at`, so the TTL sweep that takes an ended job's row takes its entries too, and a live job's
entries stay while its row does. On an endpoint of this module's own with AWS's TTL rules, swept by hand "in
the future" (`sweep_retention(at=...)`): deterministic, no waiting.

Without the TTL copied onto the entries (tag_index.COPIED), the ended job would still be listed and counted by
its tag after its row and job were gone, for ever; with the row's TTL of an older event (no version guard on
the entries), its entries would keep the live horizon and outlive the row by weeks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from onward.domain.clock import system_clock
from onward.domain.models import NewJob
from onward.pipeline.tag_index import is_tag_entry, job_of_entry
from onward.pipeline.view import StatusViewReader
from onward.settings import Settings
from onward.store.service import JobStore
from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.pipeline import LocalPipeline
from tests.support import ManualClock

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]

PROD = ("env", "prod")


@pytest.fixture(scope="module")
def retention_endpoint() -> Iterator[EmbeddedEndpoint]:
    with EmbeddedEndpoint(retention_scale=1.0) as running:
        yield running


def test_an_ended_jobs_tag_entries_go_with_its_view_row_and_a_live_jobs_stay(retention_endpoint,
                                                                             monkeypatch) -> None:
    environment = retention_endpoint.deploy("tag-retention").environment
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    settings = Settings.from_environment(environment)
    dynamodb = retention_endpoint.client("dynamodb")
    clock = ManualClock(system_clock() - 60_000)  # behind the real clock, as the relay expects
    store = JobStore(settings, client=dynamodb, clock=clock)
    pipeline = LocalPipeline.build(settings, {name: retention_endpoint.client(name)
                                              for name in ("dynamodb", "dynamodbstreams", "kinesis")})
    ended = store.create("acme", NewJob(type="demo.echo", tags={"env": "prod", "team": "red"})).job.job_id
    live = store.create("acme", NewJob(type="demo.echo", tags={"env": "prod"})).job.job_id
    clock.advance(1)
    store.cancel(ended)
    pipeline.drain()

    reader = StatusViewReader(dynamodb, settings.status_table)
    assert {view.job_id for view in reader.for_tenant("acme", limit=10, tag=PROD)[0]} == {ended, live}
    items = dynamodb.scan(TableName=settings.status_table, ConsistentRead=True)["Items"]
    rows = {item["job_id"]["S"]: int(item["expires_at"]["N"]) for item in items if not is_tag_entry(item)}
    entries = [(job_of_entry(item["job_id"]["S"]), int(item["expires_at"]["N"])) for item in items
               if is_tag_entry(item)]
    assert sorted(entries) == sorted([(ended, rows[ended]), (ended, rows[ended]), (live, rows[live])])
    assert rows[ended] < rows[live]  # the ended job's retention is shorter than a live row's horizon
    assert {view.job_id for view in reader.all()} == {ended, live}  # entries are not rows

    retention_endpoint.sweep_retention(at=rows[ended] + 1)
    assert [view.job_id for view in reader.for_tenant("acme", limit=10, tag=PROD)[0]] == [live]
    assert reader.for_tenant("acme", limit=10, tag=("team", "red"))[0] == []
    counted = reader.count_by_status("acme", tag=PROD)
    assert (counted.counts, counted.examined) == ({"queued": 1}, 1)
    left = dynamodb.scan(TableName=settings.status_table, ConsistentRead=True)["Items"]
    assert sorted(item["job_id"]["S"] for item in left if is_tag_entry(item)) == [f"TAG#{live}#env"]

    retention_endpoint.sweep_retention(at=rows[live] + 1)
    assert reader.for_tenant("acme", limit=10, tag=PROD)[0] == []
    assert dynamodb.scan(TableName=settings.status_table, ConsistentRead=True)["Items"] == []


def test_a_stale_or_repeated_event_never_moves_an_entry_back_and_a_half_written_event_completes(
        retention_endpoint, monkeypatch) -> None:
    """Without the entries' own version guard, the redelivered v1 would put the live horizon back on the ended
    job's entry (it would outlive its row) and list it as queued; with the entries written after the row
    instead of before, a failure between the two would leave the job out of its tag for good (the redelivery
    finds the row written: a duplicate, nothing written)."""
    from onward.bootstrap import Deployment
    from onward.domain.models import OutboxEvent
    from onward.domain.projection import ProjectionOutcome, view_item
    from onward.pipeline.tag_index import put_tag_entries

    environment = retention_endpoint.deploy("tag-guard").environment
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    deployment = Deployment.from_environment()
    settings, dynamodb = deployment.settings, retention_endpoint.client("dynamodb")
    store = JobStore(settings, client=dynamodb)
    job_id = store.create("acme", NewJob(type="demo.echo", tags={"env": "prod"})).job.job_id
    created = OutboxEvent.of(store.get(job_id).model_copy(update={"version": 1}))
    cancelled = OutboxEvent.of(store.cancel(job_id).job)
    projector = deployment.status_projector

    # v2's entries written, then the projector died before the row: the redelivery writes the row
    put_tag_entries(dynamodb, settings.status_table, view_item(cancelled, "t", settings.job_retention_s))
    assert projector.project(cancelled) is ProjectionOutcome.APPLIED
    assert projector.project(created) is ProjectionOutcome.STALE
    assert projector.project(cancelled) is ProjectionOutcome.DUPLICATE
    items = dynamodb.scan(TableName=settings.status_table, ConsistentRead=True)["Items"]
    row = next(item for item in items if not is_tag_entry(item))
    entry = next(item for item in items if is_tag_entry(item))
    assert (entry["version"], entry["status"], entry["expires_at"]) == (row["version"], row["status"],
                                                                         row["expires_at"])
    assert entry["status"] == {"S": "cancelled"}
    reader = StatusViewReader(dynamodb, settings.status_table)
    assert reader.count_by_status("acme", tag=PROD).counts == {"cancelled": 1}
