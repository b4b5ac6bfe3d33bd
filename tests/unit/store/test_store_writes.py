"""What a decided change writes (onward.store.ports.write_plans), the items it becomes on DynamoDB
(onward.store.dynamo.plan_items) and the transaction that carries them (onward.store.dynamo.writes),
without I/O: the items each transition carries, the conditions by role, and a cancellation's reasons read by
role. Without roles, a reason would be matched to an item by its position, and a transaction that gained
or lost an item (a result, a counter, a flex check) would blame the wrong one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from onward.domain import lifecycle
from onward.domain.dispatch import on_claim, on_end
from onward.domain.errors import StoreInvariantViolation
from onward.domain.lifecycle import Change
from onward.domain.models import ErrorSummary, NewJob
from onward.store.dynamo.keys import RUN_CLAIMED_AT, RUN_LEASE_EXPIRES_AT, Entity, job_key, queue_key, running_key
from onward.store.dynamo.plan_items import job_row_update, run_close, transition_event
from onward.store.dynamo.writes import Transaction, TransitionWrites, wire_key
from onward.store.ports import (
    Admission,
    CommitOutcome,
    Role,
    RunningUpdate,
    TransitionWrite,
    WaitingUpdate,
    judge,
)
from onward.store.ports.ready_queues import ReadyQueue
from onward.store.ports.rows import OpenAttempt, on_old_counter

NOW = 1_800_000_000_000
WRITES = TransitionWrites("jobs", "outbox")


def queued() -> Change:
    return lifecycle.create("a" * 32, "acme", NewJob(type="demo.echo"), NOW)


def claimed(admission: Admission | None = None) -> TransitionWrite:
    change = lifecycle.claim(queued().after, "w1", 30_000, NOW)
    assert isinstance(change, Change)
    return TransitionWrite.of(change, ready_shards=1, retention_s=60, job_retention_s=3600, admission=admission)


def test_a_claim_puts_its_attempt_on_the_row_takes_a_running_slot_and_leaves_its_ready_queue():
    write = claimed(Admission(running_shard=1, cap=2, active_vt=5.0))
    row = job_row_update(write)
    assert row.expected[1:] == (1, 0) and row.lapsed_by is None
    assert {"state", "attempt", "version", "lease_pk", "lease_owner"} <= set(row.set)
    assert set(row.remove) == {"ready_pk", "ready_due"}
    assert (row.set[RUN_CLAIMED_AT], row.set[RUN_LEASE_EXPIRES_AT]) == (NOW, NOW + 30_000), \
        "the attempt's claim, which its run record is built from until the close writes it"
    assert row.set["charged_entry"] == 1, "the end must charge the shard the claim took (on its queue entry)"
    assert write.running == RunningUpdate("acme", 1, on_claim(NOW), below_cap=2)
    assert write.waiting == WaitingUpdate("acme", ReadyQueue(0, 0), -1, active_vt=5.0, served=True), \
        "the served entry re-keyed, and no longer fresh"
    event = transition_event(write)
    assert (event["version"], event["status"]) == (2, "running")


def test_an_ending_attempt_is_charged_from_its_claim_and_a_reap_needs_a_lapsed_lease():
    running = claimed().change.after
    reap = lifecycle.reap(running, NOW + 31_000)
    assert isinstance(reap, Change)
    write = TransitionWrite.of(reap, ready_shards=1, retention_s=60, job_retention_s=3600, claimed_at=NOW,
                               running_shard=3, clock=7.0)
    assert job_row_update(write).lapsed_by == NOW + 31_000
    assert "charged_entry" in job_row_update(write).remove
    assert write.running == RunningUpdate("acme", 3, on_end(NOW, NOW + 31_000)), "charged to its claim's shard"
    assert write.waiting == WaitingUpdate("acme", ReadyQueue(0, 0), 1, active_vt=7.0, job_id=running.job_id), \
        "back in line at the clock"
    close = run_close(write)
    assert close is not None and close.fields["outcome"] == "lease_expired"
    assert {RUN_CLAIMED_AT, RUN_LEASE_EXPIRES_AT} <= set(job_row_update(write).remove), "the claim leaves the row"


def test_the_close_writes_the_whole_record_from_the_row_merged_and_refused_once_closed():
    """Issue 34: the record is written once, by the close: every field of the Run from the row (its lease owner,
    its claim) beside the closure, in an Update (a partial record's progress is kept) conditioned only on no
    outcome yet. Without the row's claim (a row claimed by the release before) only the closure is set, on a
    record that must exist, as before."""
    running = claimed().change.after
    change = lifecycle.fail(running, 1, "w1", ErrorSummary.of("Boom", "no"), permanent=False,
                            retry_delay_ms=1_000, now=NOW + 5_000)
    assert isinstance(change, Change)
    opened = OpenAttempt(NOW, NOW + 30_000)
    write = TransitionWrite.of(change, ready_shards=1, retention_s=60, job_retention_s=3600, opened=opened)
    assert write.running == RunningUpdate("acme", 0, on_end(NOW, NOW + 5_000)), "charged from the row's claim"
    action = WRITES.transition(write).actions[1]["Update"]
    values = action["ExpressionAttributeValues"]
    assert (values[":worker_id"], values[":claimed_at"], values[":lease_expires_at"], values[":outcome"]) == (
        {"S": "w1"}, {"N": str(NOW)}, {"N": str(NOW + 30_000)}, {"S": "failed"})
    assert values[":entity"] == {"S": Entity.RUN.value} and ":error" in values and ":expires_at" in values
    assert action["ConditionExpression"] == "attribute_not_exists(#outcome)"
    old_way = TransitionWrite.of(change, ready_shards=1, retention_s=60, job_retention_s=3600, claimed_at=NOW)
    action = WRITES.transition(old_way).actions[1]["Update"]
    assert ":worker_id" not in action["ExpressionAttributeValues"]
    assert action["ConditionExpression"] == "attribute_exists(pk) AND attribute_not_exists(#outcome)"


def test_a_flexing_claim_checks_the_others_and_each_action_has_its_role():
    """The claim's transaction holds no run record's Put (issue 34: 2 write units of about 40 a job, when the
    claim opened the record and the close updated it)."""
    write = claimed(Admission(cap=None, others_at_cap=(("b", 0, 1), ("c", 1, 2))))
    transaction = WRITES.transition(write)
    assert transaction.roles == [Role.JOB, Role.WAITING, Role.OUTBOX, Role.STILL_AT_CAP, Role.STILL_AT_CAP]
    assert not any("RUN#" in json.dumps(action) for action in transaction.actions)
    assert transaction.actions[0]["Update"]["Key"] == wire_key(job_key("a" * 32))
    assert "ConditionExpression" not in transaction.actions[1]["Update"], "flexing: no cap on its own counter"
    check = transaction.actions[-1]["ConditionCheck"]
    assert check["Key"] == wire_key(queue_key("c", 1)), "the other tenant's counter, on its queue entry"
    assert check["ConditionExpression"] == "#running >= :cap"


def test_a_completion_writes_its_result_on_the_run_record_it_closes_in_one_action_fewer():
    """Issue 34: the result rides on the run close's update (one transactional item fewer per job than a
    result item of its own, 2 write units); without it the transaction would carry a put of its own, and
    the run close's condition (no outcome yet) is what refuses a second result. The region fence stamps it."""
    running = claimed().change.after
    change = lifecycle.complete(running, 1, "w1", {"ok": 1}, NOW + 5_000)
    assert isinstance(change, Change)
    write = TransitionWrite.of(change, ready_shards=1, retention_s=60, job_retention_s=3600, claimed_at=NOW,
                               running_shard=0, region_epoch=2)
    transaction = WRITES.transition(write)
    assert transaction.roles == [Role.JOB, Role.RUN_CLOSED, Role.RUNNING, Role.OUTBOX]
    close = transaction.actions[1]["Update"]
    assert close["ExpressionAttributeValues"][":result"] == {"M": {"ok": {"N": "1"}}}
    assert close["ExpressionAttributeValues"][":result_size_bytes"] == {"N": str(len('{"ok":1}'))}
    assert "attribute_not_exists(#outcome)" in close["ConditionExpression"]
    assert all("region_epoch" in json.dumps(action) for action in transaction.actions), "every item stamped"


def test_reasons_are_read_by_role_not_position():
    transaction = Transaction()
    for role in (Role.JOB, Role.RUNNING, Role.OUTBOX, Role.STILL_AT_CAP):
        transaction.add(role, {})
    response = {"CancellationReasons": [{"Code": "None"}, {"Code": "None"}, {"Code": "None"},
                                        {"Code": "ConditionalCheckFailed", "Message": "..."}]}
    assert transaction.reasons(response) == {Role.STILL_AT_CAP: ["ConditionalCheckFailed"]}
    assert transaction.reasons({}) == {}


@pytest.mark.parametrize(("failed", "conflict", "outcome"), [
    ({Role.JOB, Role.RUNNING, Role.OUTBOX}, False, CommitOutcome.JOB_MOVED),
    ({Role.RUNNING, Role.STILL_AT_CAP}, False, CommitOutcome.CAP_REACHED),
    ({Role.STILL_AT_CAP}, False, CommitOutcome.OTHER_BELOW_CAP),
    ({Role.JOB}, True, CommitOutcome.CONFLICT),
])
def test_a_refusal_is_judged_in_one_order_for_every_recorder(failed, conflict, outcome):
    assert judge(failed, conflict=conflict, refused="-") is outcome


@pytest.mark.parametrize("role", [Role.OUTBOX, Role.RUN_OPENED, Role.RUN_CLOSED])
def test_any_other_failed_condition_is_a_broken_invariant(role):
    with pytest.raises(StoreInvariantViolation, match="claim of job"):
        judge({role}, conflict=False, refused="claim of job x refused")


def test_a_claim_charging_the_entry_it_takes_its_job_from_updates_one_item_under_its_cap():
    """Issue 34: running shard j's counter is kept on queue entry j, so a claim from entry 0 charging shard 0 is
    one Update there: the waiting count down, the counter up, the cap as its condition (a refusal is the cap's:
    Role.RUNNING). Without it the transaction would name two items of the tenant (2 write units more a job);
    naming one item twice DynamoDB refuses outright."""
    write = claimed(Admission(running_shard=0, cap=2, active_vt=5.0))
    transaction = WRITES.transition(write)
    assert transaction.roles == [Role.JOB, Role.RUNNING, Role.OUTBOX]
    entry = transaction.actions[1]["Update"]
    assert entry["Key"] == wire_key(queue_key("acme", 0))
    assert "#waiting :delta" in entry["UpdateExpression"] and "#running :running" in entry["UpdateExpression"]
    assert entry["ConditionExpression"] == "(attribute_not_exists(#running) OR #running < :cap)"
    assert entry["ExpressionAttributeValues"][":cap"] == {"N": "2"}
    elsewhere = WRITES.transition(claimed(Admission(running_shard=1, cap=1, active_vt=5.0)))
    assert elsewhere.roles == [Role.JOB, Role.WAITING, Role.RUNNING, Role.OUTBOX], \
        "another shard's counter (the job's own shard full): two entries"
    assert elsewhere.actions[2]["Update"]["Key"] == wire_key(queue_key("acme", 1))
    used_up = WRITES.transition(claimed(Admission(running_shard=0, cap=0, active_vt=5.0)))
    assert used_up.actions[1]["Update"]["ConditionExpression"] == "#running < :cap", \
        "older attempts fill the shard's share: an entry with no counter yet must not pass"


def test_an_attempt_claimed_onto_an_older_running_item_ends_there():
    """A row naming `running_shard` was charged by a release before the counters moved (on_old_counter): its
    end goes back to that RUNNING item, so that the item's count falls; the row's attribute leaves with it."""
    running = claimed().change.after
    change = lifecycle.complete(running, 1, "w1", None, NOW + 5_000)
    assert isinstance(change, Change)
    write = TransitionWrite.of(change, ready_shards=1, retention_s=60, job_retention_s=3600, claimed_at=NOW,
                               running_shard=on_old_counter(2))
    assert write.running == RunningUpdate("acme", 2, on_end(NOW, NOW + 5_000), old_counter=True)
    assert "running_shard" in job_row_update(write).remove
    (counter,) = [action["Update"] for role, action in zip(WRITES.transition(write).roles,
                                                           WRITES.transition(write).actions, strict=True)
                  if role is Role.RUNNING]
    assert counter["Key"] == wire_key(running_key("acme", 2))
    assert counter["ExpressionAttributeValues"][":entity"] == {"S": Entity.TENANT_RUNNING.value}


def test_a_returning_tenants_lift_rides_on_the_claim_and_a_lift_met_is_told_from_a_cap():
    """Issue 34: the claim serving a returning tenant raises its lift in its own transaction, on the entry it
    updates anyway (a lift request of its own was 1 write unit, about 1.9 a job when every job's tenant
    returns), only over a lower lift. Refused, the entry's item it returns says which condition failed:
    a lift as high is Role.LIFT (another claim served the tenant meanwhile: decide again from fresh counters),
    anything else the cap's. Without the item's lift read, a lift met would be taken for the cap and the
    tenant skipped as at its cap."""
    write = claimed(Admission(running_shard=0, cap=3, active_vt=5.0, lift_vt=7_000))
    transaction = WRITES.transition(write)
    entry = transaction.actions[1]["Update"]
    assert entry["UpdateExpression"].startswith("SET #lift = :lift, ")
    assert entry["ConditionExpression"] == ("(attribute_not_exists(#running) OR #running < :cap) AND "
                                           "(attribute_not_exists(#lift) OR #lift < :lift)")
    assert entry["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"

    def refused(held: dict[str, Any]) -> list[Role]:
        reasons = [{"Code": "None"}, {"Code": "ConditionalCheckFailed", "Item": held}, {"Code": "None"}]
        return [refusal.role for refusal in transaction.refused({"CancellationReasons": reasons})]

    assert refused({"running": {"N": "1"}, "lift_vt": {"N": "7000"}}) == [Role.LIFT]
    assert refused({"running": {"N": "3"}, "lift_vt": {"N": "6000"}}) == [Role.RUNNING]
    assert refused({"running": {"N": "3"}}) == [Role.RUNNING]
    plain = WRITES.transition(claimed(Admission(running_shard=0, active_vt=5.0)))
    assert "ConditionExpression" not in plain.actions[1]["Update"], "no cap, no lift: no condition"
