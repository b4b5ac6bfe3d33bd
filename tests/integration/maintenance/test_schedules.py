"""Periodic jobs on the embedded endpoint: the schedules' items on DynamoDB (onward.store.schedules) under the
Scheduler with the real JobStore, the scheduler's Lambda handler, and the /schedules routes over HTTP (every
answer checked against the OpenAPI document by test_api's Client)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

from onward.api import cursors
from onward.api.app import openapi_document
from onward.bootstrap import Deployment
from onward.domain.clock import epoch_ms, iso
from onward.domain.schedules import NewSchedule, Schedule
from onward.maintenance.scheduler import Scheduler
from onward.store.schedules import MAX_SCHEDULE_PARAMS_BYTES, MAX_SCHEDULES_PER_TENANT, AddOutcome, DynamoSchedules
from onward.store.service import JobStore
from onward_infra.gateway import build_event
from onward_infra.lambda_context import LocalLambdaContext
from tests.integration.api.test_api import OPERATOR, TOKENS, Client, Reply
from tests.integration.api_support import http_call, serve_api
from tests.integration.entrypoints.test_lambda_events import sample
from tests.support import ManualClock, put_legacy_schedules

START = "2026-01-01T00:00:00Z"


@pytest.fixture
def schedules(settings, dynamodb) -> DynamoSchedules:
    return DynamoSchedules(dynamodb, settings.jobs_table)


@pytest.fixture
def at_start(clock: ManualClock) -> ManualClock:
    clock.now = epoch_ms(START)
    return clock


def every(name: str, rate: str, clock: ManualClock, tenant: str = "acme") -> Schedule:
    return Schedule.of(tenant, NewSchedule(name=name, type="demo.echo", params={"n": name}, rate=rate), clock())


# --- the store and the scheduler on DynamoDB ----------------------------------------------------------------

def test_schedule_items_add_list_due_advance_and_remove(schedules: DynamoSchedules, at_start: ManualClock) -> None:
    """Catches the due entry and the schedule disagreeing (a due read missing a schedule, or finding one after
    it advanced or was deleted), a second add of a name, and a stale advance winning."""
    hourly, daily = every("hourly", "1 hour", at_start), every("daily", "1 day", at_start)
    assert [schedules.add(hourly), schedules.add(daily), schedules.add(hourly)] == [
        AddOutcome.ADDED, AddOutcome.ADDED, AddOutcome.NAME_TAKEN]
    assert schedules.add(every("hourly", "1 hour", at_start, tenant="globex")) is AddOutcome.ADDED
    assert [s.name for s in schedules.page("acme", 10).schedules] == ["daily", "hourly"]
    assert schedules.due(hourly.next_fire_at - 1, 10) == []
    due = schedules.due(hourly.next_fire_at, 10)
    assert sorted((s.tenant_id, s.name) for s in due) == [("acme", "hourly"), ("globex", "hourly")]
    assert schedules.advance(hourly, hourly.next_fire_at + 3_600_000)
    assert not schedules.advance(hourly, hourly.next_fire_at + 3_600_000)  # read before the move: refused
    assert [s.tenant_id for s in schedules.due(hourly.next_fire_at, 10)] == ["globex"]
    assert schedules.get("acme", "hourly").next_fire_at == hourly.next_fire_at + 3_600_000  # type: ignore[union-attr]
    assert schedules.remove("acme", "hourly") and not schedules.remove("acme", "hourly")
    assert schedules.due(hourly.next_fire_at + 3_600_000, 10)[0].tenant_id == "globex"
    assert [s.name for s in schedules.page("acme", 10).schedules] == ["daily"]


def test_two_schedulers_ticking_at_once_create_one_job_per_fire(settings, dynamodb, schedules: DynamoSchedules,
                                                                  at_start: ManualClock) -> None:
    """Catches a double fire on DynamoDB: two schedulers (threads, each its own store) tick the same moment;
    the Idempotency-Key answers the second create with the first's job, and only one advance commits."""
    schedules.add(every("minutely", "1 minute", at_start))
    at_start.advance(61)
    stores = [JobStore(settings, client=dynamodb, clock=at_start) for _ in range(2)]
    reports = []
    barrier = threading.Barrier(2)

    def tick(store: JobStore) -> None:
        barrier.wait()
        reports.append(Scheduler(store, schedules, at_start).tick())

    threads = [threading.Thread(target=tick, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(len(report.fired) for report in reports) == 1
    assert len(list(stores[0].all_jobs())) == 1
    assert iso(schedules.get("acme", "minutely").next_fire_at) == "2026-01-01T00:02:00.000Z"  # type: ignore[union-attr]


def test_a_tick_after_an_outage_creates_only_the_latest_missed_fire(settings, dynamodb, schedules: DynamoSchedules,
                                                                      at_start: ManualClock) -> None:
    """Catches a catch-up storm after an outage, on the real store: one job, for the latest fire, and the next
    fire after now."""
    schedules.add(Schedule.of("acme", NewSchedule(name="quarter", type="demo.echo", cron="*/15 * * * *"),
                              at_start()))
    at_start.advance(2 * 3600 + 5 * 60)  # 8 fires missed: 00:15 ... 02:00
    store = JobStore(settings, client=dynamodb, clock=at_start)
    report = Scheduler(store, schedules, at_start).tick()
    assert [iso(fire) for _, _, fire, _ in report.fired] == ["2026-01-01T02:00:00.000Z"] and report.skipped == 7
    assert len(list(store.all_jobs())) == 1
    assert iso(schedules.get("acme", "quarter").next_fire_at) == "2026-01-01T02:15:00.000Z"  # type: ignore[union-attr]
    assert Scheduler(store, schedules, at_start).tick().fired == []


def test_the_lambda_handler_ticks_the_deployments_scheduler(stack_environment, settings, dynamodb) -> None:
    """Catches the SchedulerFunction's handler not wired to the deployment's store and schedules (it would
    import but fire nothing)."""
    from onward.entrypoints import scheduler as handler_module

    deployment = Deployment.from_environment()
    past = ManualClock(epoch_ms("2026-01-01T00:00:00Z"))
    deployment.schedules.add(every("handled", "1 minute", past))  # long due by the real clock
    event = sample("cloudwatch-scheduled-event")  # EventBridge's, as `sam local generate-event` gives it
    answer = handler_module.handler(event, LocalLambdaContext("onward-scheduler"))
    assert answer["fired"] == 1 and answer["skipped"] > 0
    assert handler_module.handler({}, LocalLambdaContext("onward-scheduler"))["fired"] == 0
    assert len(list(deployment.job_store.all_jobs())) == 1


# --- the HTTP API -----------------------------------------------------------------------------------------------

class ScheduleClient(Client):
    """test_api's Client, taking a 204 without content as the document says it."""

    def call(self, method: str, path: str, **kwargs) -> Reply:  # type: ignore[override]
        if method != "DELETE":
            return super().call(method, path, **kwargs)
        answer = http_call(self.url, method, path, **kwargs)
        documented = openapi_document()["paths"]["/schedules/{name}"]["delete"]["responses"]
        assert str(answer.status) in documented, answer
        if answer.status == 204:
            assert answer.body is None
        else:
            assert answer.headers["content-type"] == "application/problem+json"
            assert answer.body["status"] == answer.status
        return Reply(answer.status, answer.headers, answer.body)


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[ScheduleClient]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield ScheduleClient(url)


NIGHTLY = {"name": "nightly", "type": "demo.echo", "params": {"report": "daily"}, "cron": "30 2 * * *",
           "timezone": "Europe/Paris", "priority": 3}


def test_create_list_and_delete_a_schedule(client: ScheduleClient) -> None:
    """Catches the routes not storing, listing or deleting a schedule, a repeated name not being a 409, and a
    next fire time computed outside the schedule's time zone."""
    created = client.call("POST", "/schedules", token=TOKENS["acme"], body=NIGHTLY)
    assert created.status == 201, created.body
    assert created.body["next_fire_at"].endswith(("T01:30:00.000Z", "T00:30:00.000Z"))  # 02:30 in Paris
    assert created.body["tenant_id"] == "acme" and created.body["priority"] == 3
    assert client.call("POST", "/schedules", token=TOKENS["acme"], body=NIGHTLY).status == 409
    rated = client.call("POST", "/schedules", token=TOKENS["acme"],
                        body={"name": "often", "type": "demo.sleep", "rate": "5 minutes"})
    assert rated.status == 201
    listed = client.call("GET", "/schedules", token=TOKENS["acme"])
    assert [s["name"] for s in listed.body["schedules"]] == ["nightly", "often"]
    assert listed.body["schedules"][0] == created.body
    assert client.call("DELETE", "/schedules/nightly", token=TOKENS["acme"]).status == 204
    assert client.call("DELETE", "/schedules/nightly", token=TOKENS["acme"]).status == 404
    assert client.call("DELETE", "/schedules/not%20a%20name", token=TOKENS["acme"]).status == 404
    assert [s["name"] for s in client.call("GET", "/schedules", token=TOKENS["acme"]).body["schedules"]] == ["often"]


@pytest.mark.parametrize(("change", "where"), [
    ({"cron": "61 * * * *"}, "cron"),
    ({"cron": None, "rate": "10 seconds"}, "rate"),
    ({"rate": "1 hour"}, "exactly one"),
    ({"cron": None}, "exactly one"),
    ({"timezone": "Nowhere/Land"}, "timezone"),
    ({"name": "no/slash"}, "name"),
    ({"type": "demo.nope"}, "no job type"),
    ({"tenant_id": "globex"}, "tenant_id"),
])
def test_bad_schedules_are_422s_that_store_nothing(client: ScheduleClient, change: dict, where: str) -> None:
    """Catches a schedule stored that could never fire as asked, or for a job type the workers do not run."""
    body = {key: value for key, value in {**NIGHTLY, **change}.items() if value is not None}
    reply = client.call("POST", "/schedules", token=TOKENS["acme"], body=body)
    assert reply.status == 422 and where in reply.body["detail"], reply.body
    assert client.call("GET", "/schedules", token=TOKENS["acme"]).body["schedules"] == []


def test_another_tenant_cannot_see_or_delete_a_schedule(client: ScheduleClient) -> None:
    """Catches a schedule leaking across tenants: listing, deleting, and a tenant naming another by ?tenant=."""
    assert client.call("POST", "/schedules", token=TOKENS["acme"], body=NIGHTLY).status == 201
    assert client.call("GET", "/schedules", token=TOKENS["globex"]).body["schedules"] == []
    assert client.call("DELETE", "/schedules/nightly", token=TOKENS["globex"]).status == 404
    assert client.call("GET", "/schedules?tenant=acme", token=TOKENS["globex"]).status == 403
    assert client.call("POST", "/schedules", token=TOKENS["globex"], body=NIGHTLY).status == 201  # its own
    assert client.call("GET", "/schedules", token=OPERATOR).status == 400
    operator_view = client.call("GET", "/schedules?tenant=acme", token=OPERATOR)
    assert [s["tenant_id"] for s in operator_view.body["schedules"]] == ["acme"]
    assert client.call("DELETE", "/schedules/nightly?tenant=acme", token=OPERATOR).status == 204
    assert [s["tenant_id"] for s in client.call("GET", "/schedules?tenant=globex",
                                                 token=OPERATOR).body["schedules"]] == ["globex"]
    for method, path in (("GET", "/schedules"), ("POST", "/schedules"), ("DELETE", "/schedules/nightly")):
        assert client.call(method, path, token="wrong", body=NIGHTLY if method == "POST" else None).status == 401


@pytest.mark.own_stack
def test_onward_ups_scheduler_loop_fires_a_due_schedule(stack_environment) -> None:
    """Catches `onward up` not running the scheduler (LocalPlatform's loop missing, or not wired to the
    deployment's schedules): a due schedule must become a job within a few ticks."""
    import time

    from onward.runtime.demo_jobs import registry
    from onward_infra.platform import LocalPlatform, PlatformOptions

    deployment = Deployment.from_environment()
    platform = LocalPlatform(deployment, registry, PlatformOptions(http_port=0, scheduler_interval_s=0.1))
    deployment.schedules.add(every("looped", "1 minute", ManualClock(epoch_ms("2026-01-01T00:00:00Z"))))
    platform.scheduler.start()  # this loop alone: no workers, pollers or gateway
    try:
        deadline = time.monotonic() + 10
        while not list(deployment.job_store.all_jobs()) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        platform.scheduler.stop()
    assert [job.type for job in deployment.job_store.all_jobs()] == ["demo.echo"]


def test_a_schedule_posted_over_http_fires_a_job_its_tenant_then_lists(client: ScheduleClient, settings, dynamodb,
                                                                        pipeline) -> None:
    """POST /schedules, one scheduler tick at the schedule's first fire, and the job it created is listed by GET
    /jobs for that tenant (and shown by GET /jobs/{id}) with the schedule's type and params, but not for another
    tenant. Catches a schedule stored by the API that the scheduler does not find or fires for another tenant,
    or a fired job that does not reach the tenant's listing."""
    created = client.call("POST", "/schedules", token=TOKENS["acme"],
                          body={"name": "minutely", "type": "demo.echo", "params": {"from": "schedule"},
                                "rate": "1 minute"})
    assert created.status == 201, created.body
    fire_at = epoch_ms(created.body["next_fire_at"])
    clock = ManualClock(fire_at)
    store = JobStore(settings, client=dynamodb, clock=clock)
    report = Scheduler(store, DynamoSchedules(dynamodb, settings.jobs_table), clock).tick()
    ((tenant, name, fired_at, job_id),) = report.fired
    assert (tenant, name, fired_at) == ("acme", "minutely", fire_at)
    pipeline.drain()

    listed = client.call("GET", "/jobs", token=TOKENS["acme"]).body["jobs"]
    assert [(job["job_id"], job["type"], job["status"]) for job in listed] == [(job_id, "demo.echo", "queued")]
    assert client.call("GET", f"/jobs/{job_id}", token=TOKENS["acme"]).body["visible"] is True
    assert client.call("GET", f"/jobs/{job_id}/params", token=TOKENS["acme"]).body["params"] == {"from": "schedule"}
    assert client.call("GET", "/jobs", token=TOKENS["globex"]).body["jobs"] == []


# --- paging, size and the cap over HTTP -------------------------------------------------------------------------

def _names(client: ScheduleClient, token: str, limit: int = 100) -> list[str]:
    """Every schedule name of the caller's tenant, following the cursors."""
    names: list[str] = []
    path = f"/schedules?limit={limit}"
    while True:
        page = client.call("GET", path, token=token)
        assert page.status == 200, page.body
        names += [schedule["name"] for schedule in page.body["schedules"]]
        if page.body["cursor"] is None:
            return names
        path = f"/schedules?limit={limit}&cursor={page.body['cursor']}"


def test_schedules_are_listed_a_page_at_a_time(client: ScheduleClient) -> None:
    """Catches GET /schedules answering every schedule at once (26 of 256 KiB made 6.6 MB, over Lambda's 6 MB:
    the tenant could no longer list them), pages that repeat or skip one, and a cursor that lists another
    tenant's schedules or starts where no page ended."""
    for number in range(25):
        body = {"name": f"every-{number:02d}", "type": "demo.echo", "rate": "1 hour"}
        assert client.call("POST", "/schedules", token=TOKENS["acme"], body=body).status == 201
    first = client.call("GET", "/schedules?limit=10", token=TOKENS["acme"]).body
    assert [s["name"] for s in first["schedules"]] == [f"every-{n:02d}" for n in range(10)]
    assert first["cursor"] is not None
    assert len(client.call("GET", "/schedules", token=TOKENS["acme"]).body["schedules"]) == 20  # the default
    assert _names(client, TOKENS["acme"], limit=10) == [f"every-{n:02d}" for n in range(25)]
    foreign = client.call("GET", f"/schedules?cursor={first['cursor']}", token=TOKENS["globex"])
    assert foreign.status == 400, foreign.body
    job_shaped = cursors.encode_cursor({"job_id": {"S": "a" * 32}, "tenant_id": {"S": "acme"},
                                        "occurred_at": {"S": "2026-01-01T00:00:00.000Z"}})
    bad_name = cursors.schedule_cursor("acme", "no/slash")
    for query in (f"cursor={job_shaped}", f"cursor={bad_name}", "cursor=!!", "limit=0", "limit=101"):
        assert client.call("GET", f"/schedules?{query}", token=TOKENS["acme"]).status == 400, query


def test_params_over_the_bound_are_a_413_and_no_page_outgrows_lambdas_answer(client: ScheduleClient,
                                                                            settings, dynamodb) -> None:
    """Catches a schedule stored whatever its params (26 of them as large as a body may be, each 413 here, made
    a listing of 6.6 MB), and a bound loose enough that a full page of the largest schedules does not fit
    Lambda's 6 MB answer: 100 schedules whose params are all `"` (2 bytes in the body's JSON, 4 once Lambda
    quotes the body) are answered in under 4 MB."""
    from onward.api import app as api

    huge = {"name": "huge", "type": "demo.echo", "rate": "1 hour", "params": {"q": "a" * 250_000}}
    for number in range(26):
        refused = client.call("POST", "/schedules", token=TOKENS["acme"], body={**huge, "name": f"huge-{number}"})
        assert refused.status == 413 and str(MAX_SCHEDULE_PARAMS_BYTES) in refused.body["detail"], refused.body
    quotes = {"q": '"' * ((MAX_SCHEDULE_PARAMS_BYTES - len('{"q":""}')) // 2)}
    at_bound = client.call("POST", "/schedules", token=TOKENS["acme"],
                           body={"name": "q-000", "type": "demo.echo", "rate": "1 hour", "params": quotes})
    assert at_bound.status == 201, at_bound.body
    schedules = DynamoSchedules(dynamodb, settings.jobs_table)
    for number in range(1, 100):
        schedules.add(Schedule.of("acme", NewSchedule(name=f"q-{number:03d}", type="demo.echo",
                                                      params=quotes, rate="1 hour"), epoch_ms(START)))
    event = build_event("GET", "/schedules?limit=100", [("Authorization", f"Bearer {TOKENS['acme']}")], b"")
    answer = api.handler(event, LocalLambdaContext("onward-api"))
    assert answer["statusCode"] == 200 and len(json.loads(answer["body"])["schedules"]) == 100
    assert len(json.dumps(answer)) < 4_000_000, len(json.dumps(answer))  # Lambda's limit: 6 MB


def test_parallel_creates_over_http_stop_at_the_cap(client: ScheduleClient, settings, dynamodb) -> None:
    """Catches a tenant's cap checked before the write rather than by it (24 parallel creates at 996 made
    1,001, one of them never listed), and a tenant whose schedules predate the counter getting a fresh 1,000
    (its counter, missing, is counted once from its schedules)."""
    put_legacy_schedules(dynamodb, settings.jobs_table, [
        Schedule.of("acme", NewSchedule(name=f"old-{number:04d}", type="demo.echo", rate="1 hour"), epoch_ms(START))
        for number in range(MAX_SCHEDULES_PER_TENANT - 4)])
    statuses: list[tuple[int, str | None]] = []
    barrier = threading.Barrier(24)

    def create(number: int) -> None:
        body = {"name": f"new-{number:02d}", "type": "demo.echo", "rate": "1 hour"}
        barrier.wait()
        reply = client.call("POST", "/schedules", token=TOKENS["acme"], body=body)
        statuses.append((reply.status, None if reply.status == 201 else reply.body["type"].rsplit("/", 1)[1]))

    threads = [threading.Thread(target=create, args=(number,)) for number in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses, key=str) == [(201, None)] * 4 + [(409, "too-many-schedules")] * 20
    assert len(_names(client, TOKENS["acme"])) == MAX_SCHEDULES_PER_TENANT
    assert client.call("DELETE", "/schedules/old-0000", token=TOKENS["acme"]).status == 204
    assert client.call("POST", "/schedules", token=TOKENS["acme"],
                       body={"name": "after-delete", "type": "demo.echo", "rate": "1 hour"}).status == 201


def test_tenants_from_before_the_counter_are_counted_once_under_concurrent_writes(
        settings, dynamodb, schedules: DynamoSchedules, at_start: ManualClock) -> None:
    """Catches a missing counter taken as 0 (a tenant past its cap given 1,000 more), counted by each writer
    that finds it missing (the last count wins, whatever committed in between), or a delete of such a tenant's
    schedule refused: 12 adds at once on 998 schedules without a counter store exactly 2."""
    put_legacy_schedules(dynamodb, settings.jobs_table,
                         [every(f"old-{number:04d}", "1 hour", at_start) for number in range(998)]
                         + [every(f"old-{number}", "1 hour", at_start, tenant="globex") for number in range(3)])
    outcomes: list[AddOutcome] = []
    barrier = threading.Barrier(12)

    def add(number: int) -> None:
        barrier.wait()
        outcomes.append(schedules.add(every(f"new-{number:02d}", "1 hour", at_start)))

    threads = [threading.Thread(target=add, args=(number,)) for number in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcome.value for outcome in outcomes) == ["added"] * 2 + ["too_many"] * 10
    assert schedules.remove("globex", "old-1")  # no counter yet: counted (3), then lowered with the delete
    for number in range(MAX_SCHEDULES_PER_TENANT - 2):
        assert schedules.add(every(f"g{number:04d}", "1 hour", at_start, tenant="globex")) is AddOutcome.ADDED
    assert schedules.add(every("one-too-many", "1 hour", at_start, tenant="globex")) is AddOutcome.TOO_MANY


def test_a_schedule_stored_under_looser_rules_stops_no_tick_and_no_listing(
        settings, dynamodb, schedules: DynamoSchedules, at_start: ManualClock) -> None:
    """Schedules stored before today's input rules (a `localtime` zone, a cron with Arabic-Indic digits) are
    skipped, with a warning, by the scheduler's due read and the tenant's listing, and can still be deleted.
    Without the tolerant read, one such row made every tick fail (no tenant's schedule fired again) and its
    tenant's GET /schedules a 500; without reading only the delete's two values, it could not be removed."""
    legacy = [Schedule.model_construct(**{**every(name, "1 minute", at_start).model_dump(), **change})
              for name, change in (("host-zone", {"timezone": "localtime"}),
                                   ("odd-digits", {"rate": None, "cron": "٣ * * * *"}))]
    put_legacy_schedules(dynamodb, settings.jobs_table, legacy)
    assert schedules.add(every("good", "1 minute", at_start)) is AddOutcome.ADDED
    at_start.advance(61)
    report = Scheduler(JobStore(settings, client=dynamodb, clock=at_start), schedules, at_start).tick()
    assert [name for _, name, _, _ in report.fired] == ["good"]
    assert [s.name for s in schedules.page("acme", 10).schedules] == ["good"]
    assert schedules.remove("acme", "host-zone") and schedules.remove("acme", "odd-digits")
    assert not schedules.remove("acme", "host-zone")
