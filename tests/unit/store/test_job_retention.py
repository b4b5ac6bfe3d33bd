"""The job retention (ONWARD_JOB_RETENTION_DAYS, template parameter JobRetentionDays) as the pure item builders
stamp it: which items carry the TTL `expires_at` (epoch seconds), from when, and which never do; the setting
it comes from; the template that enables TTL on the tables and hands the setting to every writer; and the
projector's and the parked records' items (over a stand-in client that keeps what is put).

The embedded endpoint deleting what expired, and keeping what did not, is tests/integration/store/test_job_retention.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from onward.bootstrap import Deployment
from onward.domain import lifecycle
from onward.domain.clock import epoch_ms, iso
from onward.domain.lifecycle import Change, Decision
from onward.domain.models import ErrorSummary, Job, NewJob, OutboxEvent, Run
from onward.domain.projection import ProjectionOutcome, view_expires_at, view_fields, view_item
from onward.domain.states import JobState, RunOutcome, is_terminal
from onward.operator.conflicts import differences
from onward.pipeline.parking import ParkedRecords
from onward.pipeline.projector.projector import StatusProjector
from onward.settings import DAY_S, DEFAULT_JOB_RETENTION_DAYS, DEFAULT_OUTBOX_RETENTION_DAYS, InvalidSetting, Settings
from onward.store.dynamo.attributes import from_item, to_item
from onward.store.dynamo.keys import (
    idempotency_item,
    job_expires_at,
    job_from_values,
    job_item,
    run_from_values,
    run_item,
    ttl_after,
)
from onward.store.dynamo.plan_items import job_row_update, new_job_items, run_close
from onward.store.ports import NewJobWrite, TransitionWrite
from tests.support import ManualClock
from tests.unit.project.test_template import FUNCTIONS, RESOURCES, TEMPLATE, code_of, function_environment

NOW = 1_800_000_000_123  # ms: not a whole second, so a TTL that forgot to divide (or rounded up) shows
RETENTION_S = 3 * 86_400
OUTBOX_RETENTION_S = 7 * 86_400
ERROR = ErrorSummary.of("Boom", "it broke")


def changed(decision: Decision) -> Change:
    assert isinstance(decision, Change), decision
    return decision


def queued(max_attempts: int = 3) -> Job:
    return lifecycle.create("a" * 32, "acme", NewJob(type="demo.echo", max_attempts=max_attempts), NOW).after


def running(max_attempts: int = 3, *, at: int = NOW + 1_000) -> Job:
    return changed(lifecycle.claim(queued(max_attempts), "w1", 30_000, at)).after


def write_of(change: Change) -> TransitionWrite:
    return TransitionWrite.of(change, ready_shards=1, retention_s=OUTBOX_RETENTION_S, job_retention_s=RETENTION_S,
                              claimed_at=NOW + 1_000)


# Every transition that writes a job row, from the state it starts in (the time of each is END).
END = NOW + 5_555
TRANSITIONS: dict[str, Any] = {
    "complete": lambda: lifecycle.complete(running(), 1, "w1", {"ok": 1}, END),
    "fail, retry": lambda: lifecycle.fail(running(), 1, "w1", ERROR, permanent=False, retry_delay_ms=1, now=END),
    "fail, permanent": lambda: lifecycle.fail(running(), 1, "w1", ERROR, permanent=True, retry_delay_ms=1, now=END),
    "fail, last attempt": lambda: lifecycle.fail(running(1), 1, "w1", ERROR, permanent=False, retry_delay_ms=1,
                                                 now=END),
    "fail, cancel requested": lambda: lifecycle.fail(
        changed(lifecycle.cancel(running(), NOW + 2_000)).after, 1, "w1", ERROR, permanent=False,
        retry_delay_ms=1, now=END),
    "reap": lambda: lifecycle.reap(running(), NOW + 40_000),
    "reap, last attempt": lambda: lifecycle.reap(running(1), NOW + 40_000),
    "reap, cancel requested": lambda: lifecycle.reap(changed(lifecycle.cancel(running(), NOW + 2_000)).after,
                                                     NOW + 40_000),
    "release": lambda: lifecycle.release(running(), 1, "w1", END),
    "release, cancel requested": lambda: lifecycle.release(
        changed(lifecycle.cancel(running(), NOW + 2_000)).after, 1, "w1", END),
    "acknowledge cancel": lambda: lifecycle.acknowledge_cancel(
        changed(lifecycle.cancel(running(), NOW + 2_000)).after, 1, "w1", END),
    "request cancel": lambda: lifecycle.cancel(running(), END),
    "cancel queued": lambda: lifecycle.cancel(queued(), END),
    "claim": lambda: lifecycle.claim(queued(), "w1", 30_000, END),
    # a queued row whose attempts are used up (a legacy row): the claim ends it instead
    "exhaust at claim": lambda: lifecycle.claim(queued(1).model_copy(
        update={"attempt": 1, "last_outcome": RunOutcome.LEASE_EXPIRED}), "w2", 30_000, END),
}


# --- the pure builders ----------------------------------------------------------------------------------------

def test_ttl_after_is_epoch_seconds_rounded_down():
    """DynamoDB's TTL reads epoch SECONDS: without the division a TTL in milliseconds would read as a date
    some 50,000 years away (nothing would ever expire); rounding down never keeps an item past its time."""
    assert ttl_after(NOW, RETENTION_S) == 1_800_000_000 + RETENTION_S
    assert ttl_after(1_999, 10) == 11


@pytest.mark.parametrize("name", sorted(TRANSITIONS))
def test_a_job_row_gets_a_ttl_exactly_when_its_transition_ends_the_job(name):
    """Without the terminal-only rule a queued or running job would expire and be lost (its row deleted under
    a worker, its status gone); without the stamp at the end an ended job's row would be kept forever. The
    row's update sets it only on the transition that ends the job (from the row diff)."""
    change = changed(TRANSITIONS[name]())
    write = write_of(change)
    ended = is_terminal(change.after.state)
    expected = change.after.updated_at // 1000 + RETENTION_S if ended else None
    assert job_expires_at(change.after, RETENTION_S) == expected
    assert job_item(change.after, 1, RETENTION_S).get("expires_at") == expected
    row = job_row_update(write)
    assert row.set.get("expires_at") == expected
    assert "expires_at" not in row.remove


def test_every_ending_transition_is_covered():
    """The table above must reach every terminal state (a new path to one would need its own row here)."""
    ends = {changed(make()).after.state for make in TRANSITIONS.values()}
    assert {state for state in ends if is_terminal(state)} == {state for state in JobState if is_terminal(state)}


def test_a_replay_removes_the_ttl_of_the_jobs_first_end():
    """Terminal states are left only by an operator's replay (dead / quarantined -> queued): without the
    removal the replayed job's row would still expire at its first end's time, while it is queued again."""
    dead = changed(lifecycle.fail(running(), 1, "w1", ERROR, permanent=True, retry_delay_ms=1, now=END)).after
    assert job_item(dead, 1, RETENTION_S)["expires_at"] == END // 1000 + RETENTION_S
    replay = changed(lifecycle.replay(dead, END + 60_000))
    row = job_row_update(write_of(replay))
    assert "expires_at" in row.remove and "expires_at" not in row.set
    assert "expires_at" not in job_item(replay.after, 1, RETENTION_S)


@pytest.mark.parametrize("name", [name for name in sorted(TRANSITIONS) if name.startswith(
    ("complete", "fail", "reap", "release", "acknowledge"))])
def test_a_run_record_gets_a_ttl_when_its_attempt_ends_and_none_while_it_runs(name):
    """Without the stamp on the run's closing fields a finished attempt's record would be kept forever; with
    one on an open run, a long attempt's record would vanish while it runs."""
    change = changed(TRANSITIONS[name]())
    close = run_close(write_of(change))
    assert close is not None and change.close_run is not None
    assert close.fields["expires_at"] == change.close_run.finished_at // 1000 + RETENTION_S
    claim = job_row_update(write_of(changed(lifecycle.claim(queued(), "w1", 30_000, NOW))))
    assert "expires_at" not in claim.set, "a running job (and its attempt, read from its row) never expires"


def test_the_result_expires_with_the_row_of_the_job_it_ended():
    """The result is on the run record the completion closes (issue 34): without that run's TTL being the job
    row's, the result would outlive the job (or go first, and a succeeded job would show none)."""
    change = changed(TRANSITIONS["complete"]())
    write = write_of(change)
    close = run_close(write)
    assert close is not None
    assert close.fields["expires_at"] == job_row_update(write).set["expires_at"] == END // 1000 + RETENTION_S
    assert (close.fields["result"], close.fields["result_size_bytes"]) == ({"ok": 1}, len('{"ok":1}'))


def test_an_idempotency_key_is_kept_the_retention_after_the_job_was_created():
    """The key's window is the retention from the create: without a TTL every key would be kept forever;
    the job row of an ended job always outlives it (it is stamped at the end, later)."""
    change = lifecycle.create("b" * 32, "acme", NewJob(type="demo.echo"), NOW)
    write = NewJobWrite.of(change, ready_shards=1, retention_s=OUTBOX_RETENTION_S, job_retention_s=RETENTION_S,
                           idempotency=("order-7", "digest"))
    items = new_job_items(write)
    assert items.idempotency == {"pk": "IDEM#acme#order-7", "sk": "IDEM", "job_id": "b" * 32, "digest": "digest",
                                 "expires_at": NOW // 1000 + RETENTION_S}
    assert items.idempotency == idempotency_item(change.after, "order-7", "digest", RETENTION_S)
    assert "expires_at" not in items.job, "a new job has not ended"
    assert items.outbox["expires_at"] == NOW // 1000 + OUTBOX_RETENTION_S, "the outbox keeps its own retention"


def test_the_ttl_stays_in_storage_and_never_reaches_the_models():
    """Job and Run refuse unknown fields: without expires_at among the storage-only attributes, reading an
    ended job's row or a finished run (the store, the API's /runs) would fail."""
    dead = changed(lifecycle.fail(running(), 1, "w1", ERROR, permanent=True, retry_delay_ms=1, now=END))
    assert job_from_values(job_item(dead.after, 2, RETENTION_S)) == (dead.after, 2, 0)
    close = run_close(write_of(dead))
    assert close is not None and "expires_at" in close.fields
    opened = Run(job_id=dead.after.job_id, attempt=1, worker_id="w1", claimed_at=NOW + 1_000,
                 lease_expires_at=NOW + 31_000)
    run = run_from_values({**run_item(opened), **close.fields})  # the closed run as stored
    assert (run.outcome, run.finished_at, run.error) == (RunOutcome.FAILED, END, ERROR)


# --- the status view --------------------------------------------------------------------------------------

def event_of(job: Job, committed_at: str | None = None) -> OutboxEvent:
    return OutboxEvent.of(job).model_copy(update={"committed_at": committed_at})


def test_every_view_row_gets_a_ttl_from_its_commit_time_a_live_jobs_after_the_horizon():
    """A terminal status's row goes after the job retention; a live job's row after the live horizon (without
    it a replayed `running` event of a deleted job would stay for good). The time is the commit's when the
    relay knows it, else the decision's."""
    done = changed(TRANSITIONS["complete"]()).after
    committed = iso(END + 1_400)
    horizon = 10 * RETENTION_S
    assert view_expires_at(event_of(done, committed), RETENTION_S) == (END + 1_400) // 1000 + RETENTION_S
    assert view_expires_at(event_of(done), RETENTION_S) == END // 1000 + RETENTION_S
    for job in (queued(), running(), changed(lifecycle.cancel(running(), END)).after):
        assert view_expires_at(event_of(job, committed), RETENTION_S) is None  # no horizon: as before
        assert view_expires_at(event_of(job, committed), RETENTION_S, horizon) == (END + 1_400) // 1000 + horizon
        assert view_item(event_of(job, committed), iso(END), RETENTION_S, horizon)["expires_at"] == (
            (END + 1_400) // 1000 + horizon)
    item = view_item(event_of(done, committed), iso(END + 2_000), RETENTION_S)
    assert item == {**view_fields(event_of(done, committed)), "projected_at": iso(END + 2_000),
                    "expires_at": epoch_ms(committed) // 1000 + RETENTION_S}


def test_a_conflict_is_not_reported_on_the_ttl():
    """The TTL follows the commit time, which differs between two deliveries of one transition: without
    leaving it out, every conflict would also list `expires_at` as a disagreement."""
    done = changed(TRANSITIONS["complete"]()).after
    held = view_item(event_of(done, iso(END + 900)), iso(END + 1_000), RETENTION_S)
    assert differences(held, event_of(done)) == ()


class PutItems:
    """A DynamoDB client stand-in that keeps every put (plain values by table) and, with `held`, refuses a
    conditional put on the status table as DynamoDB does, returning the row it holds."""

    def __init__(self, held: dict[str, Any] | None = None) -> None:
        self.held = held
        self.items: dict[str, list[dict[str, Any]]] = {}

    def put_item(self, **request: Any) -> dict[str, Any]:
        if self.held is not None and request["TableName"] == "status":
            raise ClientError({"Error": {"Code": "ConditionalCheckFailedException"}, "Item": to_item(self.held)},
                              "PutItem")
        self.items.setdefault(request["TableName"], []).append(from_item(request["Item"]))
        return {}


def projector(client: PutItems, clock: ManualClock) -> StatusProjector:
    return StatusProjector(client, "status", "conflicts", checkpoints=None, parked=None,  # unused by project()
                           clock=clock, retention_s=RETENTION_S)


def test_the_projector_writes_the_view_rows_ttl_and_a_kept_conflicts():
    """Without the projector passing its retention the view rows would be written without a TTL (kept
    forever); a kept conflict expires the retention after it was detected."""
    clock = ManualClock(END + 3_000)
    client = PutItems()
    done = changed(TRANSITIONS["complete"]()).after
    for job in (running(), done):
        assert projector(client, clock).project(event_of(job, iso(END + 1_000))) is ProjectionOutcome.APPLIED
    live, ended = client.items["status"]
    horizon = DEFAULT_OUTBOX_RETENTION_DAYS * DAY_S + RETENTION_S  # outbox retention + the longest job retention
    assert live["expires_at"] == (END + 1_000) // 1000 + horizon
    assert ended["expires_at"] == (END + 1_000) // 1000 + RETENTION_S

    other = done.model_copy(update={"attempt": 2})  # the same version decided differently
    client = PutItems(held=ended)
    assert projector(client, clock).project(event_of(other)) is ProjectionOutcome.CONFLICT
    (kept,) = client.items["conflicts"]
    assert kept["expires_at"] == clock.now // 1000 + RETENTION_S


def test_a_parked_record_expires_the_retention_after_it_was_parked():
    """Without it every unreadable record would be kept forever (with up to 300 KB of its bytes)."""
    clock = ManualClock(NOW)
    client = PutItems()
    ParkedRecords(client, "parked", clock, retention_s=RETENTION_S).park("relay", "s-1", "42", b"{", "not JSON")
    (parked,) = client.items["parked"]
    assert parked["expires_at"] == NOW // 1000 + RETENTION_S and parked["parked_at"] == iso(NOW)


def test_the_deployment_hands_its_retention_to_the_projector_and_the_parked_records():
    """Without the wiring in onward/bootstrap.py the Lambda functions would stamp the default 30 days
    whatever JobRetentionDays the stack was deployed with."""
    client = PutItems()
    settings = Settings(status_table="status", conflicts_table="conflicts", parked_table="parked",
                        checkpoint_table="checkpoints", jobs_table="jobs", job_retention_days=2)
    deployment = Deployment(settings, clients={"dynamodb": client})
    deployment.parked_records.park("projector", "s-1", "7", b"x", "bad")
    deployment.status_projector.project(event_of(changed(TRANSITIONS["complete"]()).after, iso(END)))
    (parked,) = client.items["parked"]
    assert parked["expires_at"] == epoch_ms(parked["parked_at"]) // 1000 + 2 * 86_400
    (row,) = client.items["status"]
    assert row["expires_at"] == END // 1000 + 2 * 86_400


def test_the_deployment_hands_its_retention_policy_to_the_projector():
    """Without the policy passed in onward/bootstrap.py a succeeded job's view row would keep
    JobRetentionDays whatever RetentionPolicy says for its outcome."""
    client = PutItems()
    settings = Settings(status_table="status", conflicts_table="conflicts", parked_table="parked",
                        checkpoint_table="checkpoints", jobs_table="jobs", job_retention_days=2,
                        retention_policy_document='{"default": {"succeeded": 0.5}}')
    deployment = Deployment(settings, clients={"dynamodb": client})
    deployment.status_projector.project(event_of(changed(TRANSITIONS["complete"]()).after, iso(END)))
    (row,) = client.items["status"]
    assert row["expires_at"] == END // 1000 + 43_200


# --- the setting and the template -------------------------------------------------------------------------

def test_the_setting_defaults_to_30_days_and_reads_whole_days():
    assert Settings.from_environment({}).job_retention_days == DEFAULT_JOB_RETENTION_DAYS == 30
    settings = Settings.from_environment({"ONWARD_JOB_RETENTION_DAYS": "7"})
    assert (settings.job_retention_days, settings.job_retention_s) == (7, 7 * 86_400)


@pytest.mark.parametrize("value", ["0", "0.5", "1.5", "-1", "soon", "nan", "inf"])
def test_a_retention_that_cannot_work_is_refused_by_name(value):
    """Without the check "0.5" would become 0 days: every ended job would be deleted as it ends."""
    with pytest.raises(InvalidSetting, match="ONWARD_JOB_RETENTION_DAYS"):
        Settings.from_environment({"ONWARD_JOB_RETENTION_DAYS": value})


@pytest.mark.parametrize("table", ["JobsTable", "OutboxTable", "StatusTable", "ConflictsTable", "ParkedTable"])
def test_ttl_is_enabled_on_expires_at_for_every_table_with_expiring_items(table):
    """Without the specification DynamoDB ignores `expires_at` and keeps every item."""
    assert RESOURCES[table]["Properties"]["TimeToLiveSpecification"] == {"AttributeName": "expires_at",
                                                                         "Enabled": True}


def test_the_parameter_is_whole_days_from_one_defaulting_to_the_settings_default():
    parameter = TEMPLATE["Parameters"]["JobRetentionDays"]
    assert (parameter["Type"], parameter["Default"], parameter["MinValue"]) == (
        "Number", DEFAULT_JOB_RETENTION_DAYS, 1)


WRITERS = ("onward.store.service", "onward.pipeline.parking", "onward.pipeline.projector.projector")


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_function_that_writes_expiring_items_gets_the_parameter(function):
    """Whoever builds a JobStore, parks a record or projects the view stamps a TTL from the setting: without
    the variable it would use the default, not the stack's JobRetentionDays."""
    if any(module in code_of(function).modules for module in WRITERS):
        assert function_environment(function)["ONWARD_JOB_RETENTION_DAYS"] == {"Ref": "JobRetentionDays"}
        assert function_environment(function)["ONWARD_RETENTION_POLICY"] == {"Ref": "RetentionPolicy"}


def test_a_bad_retention_policy_stops_the_deployment_with_the_reason():
    """Settings validate ONWARD_RETENTION_POLICY: without it a bad document would fail at the first finished
    job (or never, silently keeping the default)."""
    with pytest.raises(InvalidSetting, match=r"ONWARD_RETENTION_POLICY: .*default\.dead"):
        Settings.from_environment({"ONWARD_RETENTION_POLICY": '{"default": {"dead": 0}}'})
    policy = Settings.from_environment({"ONWARD_RETENTION_POLICY": '{"default": {"dead": 2}}',
                                        "ONWARD_JOB_RETENTION_DAYS": "3"}).retention_policy
    assert (policy.retention_s("t", "x", "dead"), policy.retention_s("t", "x", "succeeded")) == (2 * 86_400,
                                                                                                3 * 86_400)
    assert Settings.from_environment({"ONWARD_RETENTION_POLICY": ""}).retention_policy.shortest_s == 30 * 86_400
