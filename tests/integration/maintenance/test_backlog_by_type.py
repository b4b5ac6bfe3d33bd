"""The backlog per tenant and job type (onward.maintenance.backlog_types), counted against the embedded endpoint:
the heads of the ready queues read by DynamoBacklogReads.due_head give each type's due jobs and age, summing to
the tenant's due count, at one more Query per band with due jobs and none when types are not asked for."""

from __future__ import annotations

from typing import Any

import pytest

from onward.domain.models import NewJob
from onward.maintenance.backlog import BacklogCounter
from onward.maintenance.backlog_types import OTHER
from onward.settings import Settings
from onward.store.dynamo.backlog_reads import DynamoBacklogReads
from onward.store.service import JobStore
from tests.support import ManualClock

pytestmark = pytest.mark.integration


def test_due_jobs_are_split_by_type_with_each_types_age(settings: Settings, dynamodb: Any,
                                                         clock: ManualClock) -> None:
    """Without the head read the depth would be by tenant only; without the due condition the delayed job would
    count; without the age from the earliest due job of each type, `demo.echo`'s age would be its newest's."""
    store = JobStore(settings, client=dynamodb, clock=clock)
    counter = BacklogCounter(DynamoBacklogReads(dynamodb, settings.require("jobs_table"), settings.active_shards),
                             clock=clock)
    store.create("acme", NewJob(type="demo.echo"))
    clock.advance(10)
    store.create("acme", NewJob(type="demo.echo"))
    store.create("acme", NewJob(type="demo.flaky", priority=5))  # another band
    store.create("acme", NewJob(type="demo.sleep", delay_s=600.0))  # not due
    store.create("globex", NewJob(type="demo.flaky"))
    clock.advance(2)

    plain = counter.count()
    typed = counter.count(by_type=True)

    assert plain.due_by_type == {} and typed.due_by_tenant == plain.due_by_tenant == {"acme": 3, "globex": 1}
    assert typed.requests == plain.requests + 3  # acme's two bands with due jobs, globex's one
    acme = typed.due_by_type["acme"]
    assert {name: depth.due for name, depth in acme.items()} == {"demo.echo": 2, "demo.flaky": 1}
    assert acme["demo.echo"].oldest_due_age_s == pytest.approx(12.0, abs=0.01)  # the manual clock's seconds
    assert acme["demo.flaky"].oldest_due_age_s == pytest.approx(2.0, abs=0.01)
    assert {name: depth.due for name, depth in typed.due_by_type["globex"].items()} == {"demo.flaky": 1}
    assert OTHER not in acme
