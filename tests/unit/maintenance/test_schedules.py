"""Periodic jobs without AWS: when a schedule fires (onward.domain.schedules: cron in a time zone across DST changes,
rates, what is refused) and what a tick of the Scheduler does over the in-memory job store and schedules (one
job per fire, however many schedulers; one job for an outage's missed fires; next_fire_at advances)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from onward.domain.clock import epoch_ms, iso
from onward.domain.schedules import NewSchedule, Schedule, due_fire, fires_between, latest_fire, next_fire, parse_cron
from onward.maintenance.scheduler import Scheduler
from onward.store.schedules import AddOutcome, MemorySchedules
from onward.store.service import JobStore
from tests.support import ManualClock


def schedule(now: str, **timing: str) -> Schedule:
    return Schedule.of("acme", NewSchedule(name="nightly", type="demo.echo", params={"a": 1}, **timing),
                       epoch_ms(now))


def fires(s: Schedule, until: str) -> list[str]:
    return [iso(at) for at in fires_between(s, s.created_at, epoch_ms(until))]


# --- when a schedule fires ---------------------------------------------------------------------------------

def test_cron_runs_on_the_zones_wall_clock_across_spring_forward() -> None:
    """Catches cron evaluated in UTC (the local 02:30 would drift by an hour at the change) and a wall time the
    clock jumps over being dropped (no job that night) or fired twice."""
    s = schedule("2026-03-07T00:00:00Z", cron="30 2 * * *", timezone="America/New_York")
    assert fires(s, "2026-03-10T12:00:00Z") == [
        "2026-03-07T07:30:00.000Z",  # 02:30 EST
        "2026-03-08T07:30:00.000Z",  # 02:30 does not exist that night: 03:30 EDT, once
        "2026-03-09T06:30:00.000Z",  # 02:30 EDT
        "2026-03-10T06:30:00.000Z"]


def test_a_wall_time_that_occurs_twice_at_fall_back_fires_once() -> None:
    """Catches a schedule firing twice in the hour the clock repeats."""
    s = schedule("2026-10-31T12:00:00Z", cron="30 1 * * *", timezone="America/New_York")
    assert fires(s, "2026-11-02T12:00:00Z") == ["2026-11-01T05:30:00.000Z",  # 01:30 EDT, the first of two
                                                "2026-11-02T06:30:00.000Z"]  # 01:30 EST


def test_cron_fields_lists_ranges_steps_names_and_either_day_field() -> None:
    """Catches a misread field: steps, names, 7 as Sunday, and Vixie cron's OR of the two day fields."""
    spec = parse_cron("*/20 9-10 * JAN-feb mon,7")
    assert spec.minutes == (0, 20, 40) and spec.hours == (9, 10)
    assert spec.months == {1, 2} and spec.weekdays == {0, 1}
    s = schedule("2026-01-31T00:00:00Z", cron="0 0 1 * MON")  # the 1st, or any Monday
    assert fires(s, "2026-02-10T00:00:00Z") == ["2026-02-01T00:00:00.000Z", "2026-02-02T00:00:00.000Z",
                                                "2026-02-09T00:00:00.000Z"]


def test_a_rate_fires_every_period_from_creation() -> None:
    """Catches an off-by-one period: the first fire is one period after creation, never at it."""
    s = schedule("2026-01-01T00:00:10Z", rate="5 minutes")
    assert iso(s.next_fire_at) == "2026-01-01T00:05:10.000Z"
    assert fires(s, "2026-01-01T00:15:10Z") == ["2026-01-01T00:05:10.000Z", "2026-01-01T00:10:10.000Z",
                                                "2026-01-01T00:15:10.000Z"]
    assert latest_fire(s, epoch_ms("2026-01-01T00:05:09Z")) is None
    assert next_fire(s, epoch_ms("2026-01-01T00:05:10Z")) == epoch_ms("2026-01-01T00:10:10Z")


def test_after_an_outage_only_the_latest_missed_fire_is_due() -> None:
    """Catches a catch-up storm: a day without a scheduler must create one job for a minutely schedule, not
    1,440."""
    s = schedule("2026-01-01T00:00:00Z", cron="* * * * *")
    fire_at, skipped = due_fire(s, epoch_ms("2026-01-02T00:00:30Z")) or (0, 0)
    assert iso(fire_at) == "2026-01-02T00:00:00.000Z"
    assert skipped == 1439  # 00:01 to 23:59 on the 1st: 00:00 on the 2nd stands for them
    assert due_fire(s, s.next_fire_at - 1) is None


@pytest.mark.parametrize(("timing", "why"), [
    ({"cron": "* * *"}, "5 fields"),
    ({"cron": "61 * * * *"}, "minute"),
    ({"cron": "0 0 30 2 *"}, "no day"),
    ({"rate": "30 seconds"}, "not a rate"),
    ({"rate": "0 minutes"}, "at least 1 minute"),
    ({"cron": "* * * * *", "rate": "1 hour"}, "exactly one"),
    ({}, "exactly one"),
    ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "IANA"),
    ({"cron": "* * * * *", "timezone": "../etc/passwd"}, "IANA"),
])
def test_what_a_schedule_refuses(timing: dict[str, str], why: str) -> None:
    """Catches a schedule accepted that could never fire as asked (each refusal says why)."""
    with pytest.raises(ValidationError, match=why):
        NewSchedule(name="n", type="demo.echo", **timing)


@pytest.mark.parametrize("name", ["", "-lead", "a" * 65, "sp ace", "slash/"])
def test_schedule_names_are_tenant_id_shaped(name: str) -> None:
    """Catches a name that would break the item keys (`#`, `/`) or be empty."""
    with pytest.raises(ValidationError):
        NewSchedule(name=name, type="demo.echo", rate="1 hour")


# --- the scheduler over the in-memory store ---------------------------------------------------------------

@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(epoch_ms("2026-01-01T00:00:00Z"))


def test_a_due_schedule_fires_exactly_one_job_and_advances(clock: ManualClock) -> None:
    """Catches a fire created early, twice on two ticks, or without its params; and next_fire_at not moving."""
    store, schedules = JobStore.in_memory(clock=clock), MemorySchedules()
    s = Schedule.of("acme", NewSchedule(name="hourly", type="demo.echo", params={"x": 1}, rate="1 hour",
                                        priority=2), clock())
    assert (schedules.add(s), schedules.add(s)) == (AddOutcome.ADDED, AddOutcome.NAME_TAKEN)
    scheduler = Scheduler(store, schedules, clock)
    assert scheduler.tick(clock() + 3_599_999).fired == []
    clock.advance(3600)
    report = scheduler.tick()
    assert len(report.fired) == 1 and report.skipped == 0
    job = store.get(report.fired[0][3], "acme")
    assert (job.type, job.params, job.priority) == ("demo.echo", {"x": 1}, 2)
    assert schedules.get("acme", "hourly").next_fire_at == clock() + 3_600_000  # type: ignore[union-attr]
    assert scheduler.tick().fired == []
    assert len(list(store.all_jobs())) == 1


def test_two_schedulers_ticking_at_the_same_moment_create_one_job(clock: ManualClock) -> None:
    """Catches a double fire when two schedulers read the same due schedule before either advances it."""
    store, schedules = JobStore.in_memory(clock=clock), MemorySchedules()
    schedules.add(Schedule.of("acme", NewSchedule(name="m", type="demo.echo", cron="* * * * *"), clock()))
    clock.advance(61)
    first, second = Scheduler(store, schedules, clock), Scheduler(store, schedules, clock)
    stale = schedules.due(clock(), 10)  # what the second read before the first advanced
    one = first.tick()

    class Stale(MemorySchedules):
        def due(self, now: int, limit: int) -> list[Schedule]:
            return stale

        def advance(self, schedule: Schedule, next_fire_at: int) -> bool:
            return schedules.advance(schedule, next_fire_at)

    two = Scheduler(store, Stale(), clock).tick()
    assert len(one.fired) == 1 and two.fired == [] and two.repeated == 1 and two.lost == 1
    assert len(list(store.all_jobs())) == 1
    assert second.tick().fired == []


def test_a_tick_after_an_outage_creates_only_the_latest_missed_fire(clock: ManualClock) -> None:
    """Catches a catch-up storm after an outage, and the wrong fire time (the first missed one) being used."""
    store, schedules = JobStore.in_memory(clock=clock), MemorySchedules()
    schedules.add(Schedule.of("acme", NewSchedule(name="q", type="demo.echo", rate="15 minutes"), clock()))
    clock.advance(3 * 3600 + 60)  # 12 fires missed
    report = Scheduler(store, schedules, clock).tick()
    assert [iso(fire) for _, _, fire, _ in report.fired] == ["2026-01-01T03:00:00.000Z"]
    assert report.skipped == 11
    assert iso(schedules.get("acme", "q").next_fire_at) == "2026-01-01T03:15:00.000Z"  # type: ignore[union-attr]
    assert len(list(store.all_jobs())) == 1


def test_a_deleted_schedule_stops_firing_and_a_new_one_of_its_name_gets_its_own_jobs(clock: ManualClock) -> None:
    """Catches a re-created schedule's fire being answered with the old schedule's job (same name and time)."""
    store, schedules = JobStore.in_memory(clock=clock), MemorySchedules()
    scheduler = Scheduler(store, schedules, clock)
    schedules.add(Schedule.of("acme", NewSchedule(name="d", type="demo.echo", cron="0 * * * *"), clock()))
    clock.advance(3600)
    assert len(scheduler.tick().fired) == 1
    assert schedules.remove("acme", "d") and not schedules.remove("acme", "d")
    clock.advance(3600)
    assert scheduler.tick().fired == []
    schedules.add(Schedule.of("acme", NewSchedule(name="d", type="demo.sleep", cron="0 * * * *"),
                              clock() - 1800_000))
    assert len(scheduler.tick().fired) == 1
    assert sorted(job.type for job in store.all_jobs()) == ["demo.echo", "demo.sleep"]
