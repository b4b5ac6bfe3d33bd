"""Delayed jobs and GET /jobs/{job_id}/explain over real HTTP, every answer held to the OpenAPI document: a job
created with `run_at` or `delay_s` is queued but not claimed before its time, shows when it was asked to
start, and can be cancelled while it waits; a job that is not running says why, and until when, in a real
situation for each reason (scheduled, backoff, tenant_at_cap, no_worker, waiting_for_share), with an ETA once
its tenant's throughput is known.

Workers here are JobStores of the test's own (the claim path is the store's: the API's store never claims).
Their clock is the system's, as the API's, except where a ManualClock starting now moves past a run_at.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from onward.domain.backoff import BackoffPolicy
from onward.domain.clock import epoch_ms, iso, system_clock
from onward.domain.dispatch import TenantPolicy
from onward.domain.models import ErrorSummary
from onward.domain.states import JobState
from onward.store.service import JobStore, Tenant
from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client
from tests.support import ManualClock

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-wait-secret", "globex": "globex-wait-secret"}
OPERATOR = "operator-wait-secret"
MISSING = "d" * 32
HOUR_MS = 3_600_000


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


def _create(client: Client, tenant: str = "acme", **fields: Any) -> str:
    reply = client.call("POST", "/jobs", TOKENS[tenant], body={"type": "demo.echo", **fields})
    assert reply.status == 202, reply.body
    return reply.body["job_id"]


def _explain(client: Client, job_id: str, tenant: str = "acme") -> dict[str, Any]:
    reply = client.get(f"/jobs/{job_id}/explain", TOKENS[tenant])
    assert reply.status == 200, reply.body
    return reply.body


def _rfc3339(at_ms: int, offset_hours: int = 0) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).astimezone(timezone(timedelta(hours=offset_hours))).isoformat()


# --- delayed jobs --------------------------------------------------------------------------------------------------

def test_a_job_with_run_at_is_not_claimed_before_it_and_shows_it(client: Client, settings, dynamodb) -> None:
    """Catches run_at accepted but not honoured by the claim path (claimed at once), a run_at with an offset read
    as UTC, and a delayed job whose status does not say what it waits for."""
    run_at = (system_clock() // 1000 + 3600) * 1000
    job_id = _create(client, run_at=_rfc3339(run_at, offset_hours=2))
    job = JobStore(settings, client=dynamodb).get(job_id)
    assert (job.state, job.not_before, job.run_at) == (JobState.QUEUED, run_at, run_at)

    params = client.get(f"/jobs/{job_id}/params", TOKENS["acme"]).body
    assert params["run_at"] == iso(run_at)
    explained = _explain(client, job_id)
    assert (explained["reason"], explained["until"], explained["status"]) == ("scheduled", iso(run_at), "queued")
    assert explained["freshness"]["as_of"] == iso(job.updated_at)

    clock = ManualClock(system_clock())
    worker = JobStore(settings, client=dynamodb, clock=clock)
    assert worker.claim("w", 30) is None
    clock.now = run_at - 1_000
    assert worker.claim("w", 30) is None  # its queue entry was parked until the run_at: still not due
    clock.now = run_at
    lease = worker.claim("w", 30)
    assert lease is not None and lease.job_id == job_id


def test_delay_s_counts_from_the_create(client: Client) -> None:
    """Catches delay_s read in milliseconds, or counted from another moment than the job's creation."""
    job_id = _create(client, delay_s=90.5)
    params = client.get(f"/jobs/{job_id}/params", TOKENS["acme"]).body
    assert epoch_ms(params["run_at"]) - epoch_ms(params["created_at"]) == 90_500
    plain = client.get(f"/jobs/{_create(client)}/params", TOKENS["acme"]).body
    assert plain["run_at"] is None


def test_a_waiting_delayed_job_can_be_cancelled_and_never_runs(client: Client, settings, dynamodb) -> None:
    """Catches cancel refusing a job that waits for its time, or the job still claimed at its run_at."""
    job_id = _create(client, delay_s=60)
    reply = client.call("POST", f"/jobs/{job_id}/cancel", TOKENS["acme"])
    assert reply.status == 202 and reply.body["status"] == "cancelled"
    clock = ManualClock(system_clock() + 120_000)
    assert JobStore(settings, client=dynamodb, clock=clock).claim("w", 30) is None
    assert _explain(client, job_id)["reason"] == "finished"


@pytest.mark.parametrize(("fields", "field", "says"), [
    ({"run_at": _rfc3339(system_clock() + HOUR_MS), "delay_s": 5}, "delay_s", "not both"),
    ({"run_at": "2027-01-01T10:00:00"}, "run_at", "timezone"),
    ({"run_at": "2020-01-01T00:00:00Z"}, "run_at", "in the past"),
    ({"run_at": _rfc3339(system_clock() + 366 * 86_400_000)}, "run_at", "365 days"),
    ({"delay_s": 366 * 86_400}, "delay_s", "less than or equal"),
    ({"delay_s": -1}, "delay_s", "greater than or equal to 0"),
])
def test_an_impossible_start_is_a_422_naming_its_field(client: Client, settings, dynamodb, fields, field,
                                                       says) -> None:
    """Catches a start time refused without saying which field, or accepted: both fields, no zone, long past,
    more than 365 days ahead, a negative delay. Nothing is written."""
    reply = client.call("POST", "/jobs", TOKENS["acme"], body={"type": "demo.echo", **fields})
    assert reply.status == 422, reply.body
    assert [error["loc"] for error in reply.body["errors"]] == [[field]]
    assert says in reply.body["errors"][0]["msg"]
    assert dynamodb.scan(TableName=settings.jobs_table, Select="COUNT")["Count"] == 0


# --- explain: each reason from a real situation -------------------------------------------------------------------

def test_a_failed_attempt_waiting_to_retry_is_backoff_until_its_next_attempt(client: Client, settings,
                                                                           dynamodb) -> None:
    """Catches a retry_wait job explained from the claim path's point of view (due / not due) without saying it
    failed, or with another time than its next attempt."""
    job_id = _create(client)
    worker = JobStore(settings, client=dynamodb, backoff=BackoffPolicy(base_s=600))
    lease = worker.claim("w", 30)
    assert lease is not None
    worker.fail(lease, ErrorSummary.of("Boom", "try again"))
    job = worker.get(job_id)
    explained = _explain(client, job_id)
    assert (explained["reason"], explained["status"]) == ("backoff", "retry_wait")
    assert explained["until"] == iso(job.not_before)
    assert explained["eta"] is not None and explained["eta"] >= explained["until"]  # its tenant claimed: an ETA


def test_a_tenant_at_its_cap_is_said_with_running_and_cap(client: Client, settings, dynamodb) -> None:
    """Catches a job of a capped tenant explained as waiting for its share when its cap is what holds it."""
    worker = JobStore(settings, client=dynamodb)
    worker.register_tenant(Tenant("acme", TenantPolicy(cap=1)))
    first = _create(client)
    assert worker.claim("w", 30) is not None
    second = _create(client)
    explained = _explain(client, second)
    assert explained["reason"] == "tenant_at_cap", explained
    assert (explained["details"]["running"], explained["details"]["cap"]) == (1, 1)
    assert explained["eta"] is not None  # one claim in the window: a rate
    assert _explain(client, first)["reason"] == "running"


def test_nothing_claimed_in_the_window_is_no_worker(client: Client) -> None:
    """Catches a job nobody takes explained as waiting for its share (with an ETA made up)."""
    explained = _explain(client, _create(client))
    assert (explained["reason"], explained["eta"], explained["until"]) == ("no_worker", None, None)
    assert explained["details"]["claims_per_minute"] == 0 and explained["details"]["window_s"] == 300


def test_jobs_ahead_while_workers_are_busy_is_waiting_for_share_with_an_eta(client: Client, settings,
                                                                            dynamodb) -> None:
    """Catches a count ahead that includes the job itself or misses its tenant's earlier jobs, a share of the
    platform's claims that is not the tenant's, and an ETA from the platform's rate instead of the tenant's."""
    worker = JobStore(settings, client=dynamodb)
    _create(client)
    _create(client, "globex")
    assert worker.claim("w1", 30) is not None
    assert worker.claim("w2", 30) is not None  # one claim each: the workers are busy with both tenants
    earlier = _create(client)
    last = _create(client)
    explained = _explain(client, last)
    details = explained["details"]
    assert explained["reason"] == "waiting_for_share", explained
    assert (details["ahead"], details["ahead_at_least"], details["waiting"]) == (1, False, 2)
    assert (details["platform_claims"], details["share"]) == (None, None)  # every tenant's: operators only
    operator = client.get(f"/jobs/{last}/explain", OPERATOR).body["details"]
    assert (operator["platform_claims"], operator["share"]) == (2, 0.5)
    assert details["claims_per_minute"] == 0.2
    # its tenant's 2nd claim from now at 0.2 a minute: about 10 minutes from the answer
    eta_s = (epoch_ms(explained["eta"]) - epoch_ms(explained["freshness"]["as_of"])) / 1000
    assert 590 <= eta_s <= 620, eta_s
    assert _explain(client, earlier)["details"]["ahead"] == 0


def test_explain_is_scoped_like_the_job_it_explains(client: Client) -> None:
    """Catches another tenant's job explained (or told apart from a missing one), and an operator refused."""
    theirs = _create(client, "globex")
    foreign = client.get(f"/jobs/{theirs}/explain", TOKENS["acme"])
    missing = client.get(f"/jobs/{MISSING}/explain", TOKENS["acme"])
    assert foreign.status == missing.status == 404
    assert foreign.body == {**missing.body, "detail": missing.body["detail"].replace(MISSING, theirs)}
    assert client.get(f"/jobs/{theirs}/explain", OPERATOR).body["reason"] == "no_worker"
    assert client.get(f"/jobs/{theirs}/explain").status == 401


def _unmoved(explained: dict[str, Any]) -> dict[str, Any]:
    """An explanation without what moves with the clock alone: when it was decided, and its freshness."""
    return {name: value for name, value in explained.items() if name not in ("decided_at", "freshness")}


def test_a_tenants_explanation_is_the_same_whatever_another_tenant_does(client: Client, settings,
                                                                         dynamodb) -> None:
    """Catches a tenant's explanation that shows every tenant's claims (`platform_claims`: minus its own, another
    tenant's activity counted exactly), or its share of them (the same figure by division); an operator bound
    to no tenant still sees the platform's figures. Without the scoping of the window's read, globex's 30
    claims here moved acme's answer from platform_claims 1 to 31 and its share from 1.0 to 0.0323."""
    worker = JobStore(settings, client=dynamodb)
    _create(client)
    assert worker.claim("w", 30) is not None  # acme's one claim of the window
    waiting = _create(client, run_at=_rfc3339(system_clock() + HOUR_MS))  # not due: no claim takes it here
    alone = _unmoved(_explain(client, waiting))
    for _ in range(30):
        _create(client, "globex")
    for _ in range(30):
        assert worker.claim("w", 30) is not None
    busy = _explain(client, waiting)
    assert _unmoved(busy) == alone
    assert (busy["details"]["platform_claims"], busy["details"]["share"]) == (None, None)
    assert busy["details"]["claims_per_minute"] == 0.2  # its own claim, as before
    operator = client.get(f"/jobs/{waiting}/explain", OPERATOR).body
    assert (operator["details"]["platform_claims"], operator["details"]["share"]) == (31, round(1 / 31, 4))
    assert {**operator["details"], "platform_claims": None, "share": None} == busy["details"]
    assert operator["reason"] == busy["reason"] == "scheduled"
