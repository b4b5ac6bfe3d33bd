"""Unique jobs (issue 37) in DynamoDB's wire format (onward/store/dynamo/unique_keys.py): the key's item and the
conditions a create's transaction puts it on, and what a create with a unique key counts towards a transaction."""

from __future__ import annotations

from onward.domain import lifecycle
from onward.domain.models import NewJob
from onward.domain.uniqueness import UniqueHold
from onward.store.dynamo.unique_keys import unique_actions
from onward.store.dynamo.writes import TransitionWrites
from onward.store.ports import NewJobWrite, Role
from onward.store.ports.transaction_limits import job_actions
from onward.store.ports.unique_keys import UniqueClaim

NOW = 1_800_000_000_000


def test_a_first_claim_puts_the_key_only_where_none_is_or_its_window_ended() -> None:
    """The stored expiry is compared with now: TTL deletes items days late, so its presence proves nothing."""
    ((role, action),) = unique_actions("jobs", "acme", UniqueClaim("k", UniqueHold("j1", NOW + 60_000), NOW))
    put = action["Put"]
    assert role is Role.UNIQUE and put["Item"]["pk"] == {"S": "UNIQUE#acme#k"}
    assert put["ConditionExpression"] == "attribute_not_exists(pk) OR held_until <= :now"
    assert put["ExpressionAttributeValues"] == {":now": {"N": str(NOW)}}
    assert put["Item"]["held_until"] == {"N": str(NOW + 60_000)}
    assert put["Item"]["expires_at"] == {"N": str((NOW + 60_000) // 1000 + 1)}


def test_a_takeover_names_the_previous_holder_and_checks_that_it_finished() -> None:
    """Without the check on the holder's row, a create that read a finished holder could take the key from it
    after a replay made it wait again; without job_id = :holder, from a job that took the key meanwhile."""
    claim = UniqueClaim("k", UniqueHold("j2", None), NOW, previous_holder="j1")
    (put_role, put), (check_role, check) = unique_actions("jobs", "acme", claim)
    assert (put_role, check_role) == (Role.UNIQUE, Role.UNIQUE_HOLDER)
    assert put["Put"]["ConditionExpression"] == "attribute_not_exists(pk) OR job_id = :holder"
    assert "held_until" not in put["Put"]["Item"] and "expires_at" not in put["Put"]["Item"]
    condition = check["ConditionCheck"]
    assert condition["Key"] == {"pk": {"S": "JOB#j1"}, "sk": {"S": "JOB"}}
    assert condition["ConditionExpression"].startswith("attribute_not_exists(pk) OR #state IN (")
    assert {value["S"] for value in condition["ExpressionAttributeValues"].values()} == {
        "succeeded", "dead", "cancelled", "quarantined"}


def test_a_create_with_a_unique_key_adds_its_actions_to_the_transaction_and_its_count() -> None:
    """transaction_cuts counts actions by job_actions: an uncounted key's put would overflow 100 actions."""
    change = lifecycle.create("a" * 32, "acme", NewJob(type="demo.echo"), NOW)
    plain = NewJobWrite.of(change, ready_shards=1, retention_s=60, job_retention_s=60)
    fresh = NewJobWrite.of(change, ready_shards=1, retention_s=60, job_retention_s=60,
                           unique=UniqueClaim("k", UniqueHold("a" * 32, None), NOW))
    takeover = NewJobWrite.of(change, ready_shards=1, retention_s=60, job_retention_s=60,
                              unique=UniqueClaim("k", UniqueHold("a" * 32, None), NOW, previous_holder="b" * 32))
    assert (job_actions(plain), job_actions(fresh), job_actions(takeover)) == (2, 3, 4)
    writes = TransitionWrites("jobs", "outbox")
    assert len(writes.new_job(takeover).actions) == len(writes.new_job(plain).actions) + 2
    assert writes.new_jobs([fresh]).subjects.count(0) == 3
