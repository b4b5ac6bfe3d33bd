"""A running shard's RUNNING counter kept on the tenant's queue entry of that shard (issue 34), on DynamoDB: a
claim that takes its job from the entry whose counter it charges updates one item, not two (2 write units a
job), and the counters a release before the move kept on `TENANT#t#RUNNING#<j>` items still count: against the
cap, in the tenant's usage, and where the attempts claimed onto them end."""

from __future__ import annotations

from typing import Any

from onward.domain import lifecycle
from onward.domain.dispatch import TenantPolicy
from onward.domain.lifecycle import Change
from onward.domain.models import NewJob
from onward.store.dynamo.attributes import from_item, to_attribute
from onward.store.dynamo.keys import job_key, queue_key, running_key
from onward.store.dynamo.recorder import DynamoRecorder
from onward.store.dynamo.writes import wire_key
from onward.store.ports import Admission, CommitOutcome, Tenant, TransitionWrite
from onward.store.service import JobStore

ECHO = NewJob(type="demo.echo")


def _item(dynamodb: Any, table: str, key: Any) -> dict[str, Any] | None:
    item = dynamodb.get_item(TableName=table, Key=wire_key(key), ConsistentRead=True).get("Item")
    return from_item(item) if item is not None else None


def _claim_the_old_way(dynamodb: Any, table: str, store: JobStore, tenant_id: str) -> Any:
    """A claim as a worker of the release before the move left it: the attempt counted on the RUNNING item of
    shard 0 and the row naming that item (`running_shard`), nothing on the queue entry's counter. (`store`: not
    the one that ends it, which would remember the charge its own claim made.)"""
    lease = store.claim("old-worker", 30)
    assert lease is not None
    entry = _item(dynamodb, table, queue_key(tenant_id, 0))
    assert entry is not None
    dynamodb.update_item(TableName=table, Key=wire_key(queue_key(tenant_id, 0)),
                         UpdateExpression="ADD #running :minus, started_ms_sum :unstart",
                         ExpressionAttributeNames={"#running": "running"},
                         ExpressionAttributeValues={":minus": {"N": "-1"},
                                                    ":unstart": to_attribute(-lease.job.updated_at)})
    dynamodb.put_item(TableName=table, Item={
        **wire_key(running_key(tenant_id, 0)), "entity": {"S": "tenant_running"}, "tenant_id": {"S": tenant_id},
        "shard": {"N": "0"}, "running": {"N": "1"}, "started_ms_sum": to_attribute(lease.job.updated_at)})
    dynamodb.update_item(TableName=table, Key=wire_key(job_key(lease.job_id)),
                         UpdateExpression="SET running_shard = :zero REMOVE charged_entry",
                         ExpressionAttributeValues={":zero": {"N": "0"}})
    return lease


def test_a_claim_charges_the_queue_entry_it_takes_its_job_from(settings, dynamodb, clock):
    """Without the counter on the entry the claim would update two items of the tenant (its queue entry and its
    RUNNING item), and its end the RUNNING item: the entry alone holds both here, and no RUNNING item exists."""
    store = JobStore(settings, client=dynamodb, clock=clock)
    store.create("solo", ECHO)
    lease = store.claim("w1", 30)
    assert lease is not None
    entry = _item(dynamodb, settings.jobs_table, queue_key("solo", 0))
    assert entry is not None
    assert (entry["waiting"], entry["running"], entry["started_ms_sum"]) == (0, 1, lease.job.updated_at)
    assert _item(dynamodb, settings.jobs_table, running_key("solo", 0)) is None
    clock.advance(2)
    store.complete(lease, {"ok": True})
    entry = _item(dynamodb, settings.jobs_table, queue_key("solo", 0))
    assert entry is not None
    assert (entry["running"], entry["ended"], entry["ended_ms"]) == (0, 1, 2_000)
    (state,) = store.tenant_states().values()
    assert (state.usage.running, state.usage.ended, state.usage.ended_ms) == (0, 1, 2_000)


def _claim_write(recorder: DynamoRecorder, job_id: str, now: int, cap: int) -> TransitionWrite:
    found = recorder.job(job_id)
    assert found is not None
    change = lifecycle.claim(found.job, "w9", 30_000, now)
    assert isinstance(change, Change)
    return TransitionWrite.of(change, ready_shards=1, retention_s=60, job_retention_s=3_600,
                              admission=Admission(running_shard=0, cap=cap))


def test_attempts_counted_on_an_older_running_item_hold_the_cap_and_end_there(settings, dynamodb, clock):
    """Cap 2, one attempt claimed the old way and one this way: a third claim's condition on the queue entry
    refuses it. Without the older item read and left out of the entry's condition (cap 2 on an entry counting
    1) the tenant would run 3; without the older attempt's end going back to its item that item's count would
    never fall, and the tenant would stay at its cap with one attempt running."""
    table = settings.jobs_table
    store = JobStore(settings, client=dynamodb, clock=clock)
    recorder = DynamoRecorder(dynamodb, table, settings.outbox_table)
    store.register_tenant(Tenant("capped", TenantPolicy(weight=1, cap=2)))
    created = [store.create("capped", ECHO).job.job_id for _ in range(3)]
    old = _claim_the_old_way(dynamodb, table, JobStore(settings, client=dynamodb, clock=clock), "capped")
    (state,) = store.tenant_states().values()
    assert (state.usage.running, state.old_running, state.entry_caps()) == (1, (1,), (1,))
    second = store.claim("w2", 30)
    assert second is not None
    (third,) = set(created) - {old.job_id, second.job_id}
    assert recorder.commit(_claim_write(recorder, third, clock.now, cap=1)) is CommitOutcome.CAP_REACHED
    clock.advance(1)
    store.complete(old, {"ok": True})
    older = _item(dynamodb, table, running_key("capped", 0))
    assert older is not None and (older["running"], older["ended"], older["ended_ms"]) == (0, 1, 1_000)
    entry = _item(dynamodb, table, queue_key("capped", 0))
    assert entry is not None and entry["running"] == 1 and "ended" not in entry
    (state,) = store.tenant_states().values()
    assert (state.usage.running, state.usage.ended, state.old_running, state.entry_caps()) == (1, 1, (0,), (2,))
    assert recorder.commit(_claim_write(recorder, third, clock.now, cap=2)) is CommitOutcome.COMMITTED, \
        "the older attempt's end freed its slot"
