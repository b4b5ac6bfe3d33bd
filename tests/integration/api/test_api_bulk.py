"""The bulk operator actions over real HTTP (POST /ops/bulk/replay, POST /ops/bulk/cancel), every answer held to
the OpenAPI document: a dry run (the default) counts and changes nothing; a run moves exactly the jobs the filter
selects, each through the store's own transition, and skips with the reason what moved since the view saw it;
a bound operator acts only on its tenant; a bad filter is a 422 and does nothing; the report's counts add up."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from onward.domain.clock import iso, system_clock
from onward.domain.models import NewJob
from onward.domain.states import JobState
from onward.store.service import JobStore
from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client, call_with_claims
from tests.support import dead

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-bulk-secret", "globex": "globex-bulk-secret"}
OPERATOR = "operator-bulk-secret"


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


@pytest.fixture
def jobs(settings, dynamodb) -> JobStore:
    return JobStore(settings, client=dynamodb)



def adds_up(report: dict[str, Any]) -> bool:
    return report["matched"] == (report["applied"] + sum(report["skipped"].values()) + report["failed"]
                                 + report["unprocessed"])


def outbox_items(dynamodb, settings) -> int:
    return sum(page["Count"] for page in dynamodb.get_paginator("scan").paginate(
        TableName=settings.outbox_table, Select="COUNT"))


def test_a_dry_run_counts_and_changes_nothing(client, jobs, pipeline, dynamodb, settings) -> None:
    """Catches a dry run that acts (dry_run must default to true: a careless call changes nothing), a count that
    misses or double-counts jobs, and a max_jobs that does not bound the selection or hides that more matched."""
    acme = dead(jobs, "acme", 3)
    pipeline.drain()
    events = outbox_items(dynamodb, settings)
    reply = client.call("POST", "/ops/bulk/replay", OPERATOR, body={"tenant": "acme"})
    assert reply.status == 200, reply.body
    report = reply.body
    assert (report["dry_run"], report["matched"], report["more"], report["applied"]) == (True, 3, False, 0)
    assert sorted(report["sample"]) == sorted(acme) and report["unprocessed"] == 3 and adds_up(report)
    assert report["applied_ids"] == [] and report["skipped"] == {} and report["stopped"] is None
    bounded = client.call("POST", "/ops/bulk/replay", OPERATOR, body={"max_jobs": 2, "dry_run": True}).body
    assert (bounded["matched"], bounded["more"], bounded["tenant"]) == (2, True, None)
    cancel = client.call("POST", "/ops/bulk/cancel", OPERATOR, body={"tenant": "acme"}).body
    assert cancel["matched"] == 0 and cancel["dry_run"] is True  # dead jobs are not a cancel's
    assert {jobs.get(job_id).state for job_id in acme} == {JobState.DEAD}
    assert outbox_items(dynamodb, settings) == events  # nothing was written at all


def test_replay_by_tenant_type_state_and_window_replays_exactly_the_matching_jobs(client, jobs, pipeline) -> None:
    """Catches a filter field that is ignored (tenant, type, state or window: each has a dead job that matches
    all the others but not it), and a job the view still shows dead but that was replayed meanwhile being
    forced or counted as applied instead of skipped with its reason."""
    old = dead(jobs, "acme")
    time.sleep(0.05)
    since = system_clock()
    time.sleep(0.05)
    wanted = dead(jobs, "acme", 2)
    replayed_meanwhile = dead(jobs, "acme")
    other_type = dead(jobs, "acme", job_type="demo.echo")
    other_tenant = dead(jobs, "globex")
    quarantined = jobs.create("acme", NewJob(type="demo.fail", max_attempts=1)).job.job_id
    lease = jobs.claim("bulk-test", 0.05)
    assert lease is not None and lease.job_id == quarantined
    jobs.reap(now=system_clock() + 60_000)
    assert jobs.get(quarantined).state is JobState.QUARANTINED
    pipeline.drain()
    jobs.replay(replayed_meanwhile[0])  # the view still says dead

    body = {"tenant": "acme", "types": ["demo.fail"], "states": ["dead"], "since": iso(since),
            "until": iso(system_clock() + 60_000), "dry_run": False}
    reply = client.call("POST", "/ops/bulk/replay", OPERATOR, body=body)
    assert reply.status == 200, reply.body
    report = reply.body
    assert report["matched"] == 3 and adds_up(report)
    assert (report["applied"], report["applied_by_outcome"], report["skipped"], report["failed"]) == (
        2, {"queued": 2}, {"not_replayable": 1}, 0)
    assert sorted(report["applied_ids"]) == sorted(wanted) and report["unprocessed"] == 0
    assert {jobs.get(job_id).state for job_id in wanted} == {JobState.QUEUED}
    for untouched in (old, other_type, other_tenant):
        assert jobs.get(untouched[0]).state is JobState.DEAD
    assert jobs.get(quarantined).state is JobState.QUARANTINED


def test_cancel_by_filter_cancels_waiting_asks_running_and_skips_the_ended(client, jobs, pipeline) -> None:
    """Catches a bulk cancel that does not go through the store's cancel (a running job must be asked to stop,
    not ended under its worker), one that acts outside its tenant or type, and a job that finished after the view
    saw it running being counted as cancelled instead of skipped as already ended."""
    running = jobs.create("acme", NewJob(type="demo.sleep")).job.job_id
    assert (jobs.claim("bulk-test", 30) or pytest.fail("no claim")).job_id == running
    finishing = jobs.create("acme", NewJob(type="demo.sleep")).job.job_id
    finishing_lease = jobs.claim("bulk-test", 30)
    assert finishing_lease is not None and finishing_lease.job_id == finishing
    queued = [jobs.create("acme", NewJob(type="demo.sleep")).job.job_id for _ in range(2)]
    other_type = jobs.create("acme", NewJob(type="demo.echo")).job.job_id
    other_tenant = jobs.create("globex", NewJob(type="demo.sleep")).job.job_id
    pipeline.drain()
    jobs.complete(finishing_lease, {"done": True})  # ended after the view saw it running

    reply = client.call("POST", "/ops/bulk/cancel", OPERATOR,
                        body={"tenant": "acme", "types": ["demo.sleep"], "dry_run": False})
    assert reply.status == 200, reply.body
    report = reply.body
    assert (report["action"], report["tenant"], report["matched"]) == ("cancel", "acme", 4) and adds_up(report)
    assert report["applied_by_outcome"] == {"cancelled": 2, "cancel_requested": 1} and report["applied"] == 3
    assert report["skipped"] == {"already_ended": 1} and report["failed"] == 0
    assert sorted(report["applied_ids"]) == sorted([running, *queued])
    assert {jobs.get(job_id).state for job_id in queued} == {JobState.CANCELLED}
    assert jobs.get(running).state is JobState.RUNNING and jobs.get(running).cancel_requested
    assert jobs.get(finishing).state is JobState.SUCCEEDED
    assert jobs.get(other_type).state is JobState.QUEUED and jobs.get(other_tenant).state is JobState.QUEUED

    pipeline.drain()
    again = client.call("POST", "/ops/bulk/cancel", OPERATOR, body={"tenant": "acme", "dry_run": False}).body
    assert again["matched"] == 1 and again["applied_by_outcome"] == {"cancelled": 1}  # only other_type is left:
    assert again["applied_ids"] == [other_type]  # the running job already asked to stop is not selected again


def test_a_bound_operator_acts_only_on_its_tenant(stack_environment, jobs, pipeline, monkeypatch) -> None:
    """Catches a bulk route that does not scope by `tenant_scope`: an operator bound to acme must get a 403 for
    globex's jobs, and a replay without a tenant must mean acme's, not every tenant's."""
    monkeypatch.setenv("ONWARD_AUTH", "jwt")
    monkeypatch.delenv("ONWARD_TOKENS", raising=False)
    monkeypatch.delenv("ONWARD_OPERATOR_TOKEN", raising=False)
    acme = dead(jobs, "acme")
    globex = dead(jobs, "globex")
    globex_queued = jobs.create("globex", NewJob(type="demo.echo")).job.job_id
    pipeline.drain()
    bound = {"tenant": "acme", "scope": "onward-operator"}
    for path, body in (("/ops/bulk/cancel", {"tenant": "globex", "dry_run": False}),
                       ("/ops/bulk/replay", {"tenant": "globex", "dry_run": False})):
        refused = call_with_claims("POST", path, bound, body=body)
        assert refused.status == 403 and refused.body["type"].endswith("/other-tenant"), path
    replayed = call_with_claims("POST", "/ops/bulk/replay", bound, body={"dry_run": False})
    assert replayed.status == 200 and replayed.body["tenant"] == "acme" and replayed.body["applied_ids"] == acme
    assert jobs.get(globex[0]).state is JobState.DEAD and jobs.get(globex_queued).state is JobState.QUEUED
    tenant_only = call_with_claims("POST", "/ops/bulk/replay", {"tenant": "globex"}, body={"dry_run": False})
    assert tenant_only.status == 403 and jobs.get(globex[0]).state is JobState.DEAD


def test_a_bad_filter_is_a_422_naming_the_field_and_does_nothing(client, jobs, pipeline, dynamodb,
                                                                 settings) -> None:
    """Catches a filter the action cannot honour being run anyway (a replay of running jobs, a cancel without a
    tenant or of dead jobs, an empty or zoneless window, unknown fields), and refusals that do not say where."""
    (job_id,) = dead(jobs, "acme")
    pipeline.drain()
    events = outbox_items(dynamodb, settings)
    bad: list[tuple[str, Any, str]] = [
        ("replay", {"states": ["running"], "dry_run": False}, "states"),
        ("replay", {"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z", "dry_run": False}, "until"),
        ("replay", {"since": "2026-01-01T00:00:00", "dry_run": False}, "since"),
        ("replay", {"dry_run": False, "force": True}, "force"),
        ("replay", {"types": ["Not A Type"], "dry_run": False}, "types"),
        ("replay", {"max_jobs": 0, "dry_run": False}, "max_jobs"),
        ("replay", {"tenant": "bad id", "dry_run": False}, "tenant"),
        ("cancel", {"dry_run": False}, "tenant"),
        ("cancel", {"tenant": "acme", "states": ["dead"], "dry_run": False}, "states"),
        ("replay", [job_id], ""),
    ]
    for action, body, field in bad:
        reply = client.call("POST", f"/ops/bulk/{action}", OPERATOR, body=body)
        assert reply.status == 422, (action, body, reply.body)
        assert field in {str(error["loc"][0]) for error in reply.body["errors"] if error["loc"]} or not field, (
            body, reply.body)
    assert "until is before since" in client.call("POST", "/ops/bulk/replay", OPERATOR, body=bad[1][1]).body["detail"]
    assert client.call("POST", "/ops/bulk/replay", TOKENS["acme"], body={"dry_run": False}).status == 403
    assert client.call("POST", "/ops/bulk/cancel", None, body={"tenant": "acme"}).status == 401
    assert client.call("POST", "/ops/bulk/replay", OPERATOR, raw=b'{"dry_run": fal').status == 400
    assert jobs.get(job_id).state is JobState.DEAD and outbox_items(dynamodb, settings) == events
