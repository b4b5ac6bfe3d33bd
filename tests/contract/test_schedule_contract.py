"""The schedule store's contract (onward.store.schedules.ScheduleRecorder), ONE suite run against both backends:
in memory (MemorySchedules) and on DynamoDB (DynamoSchedules on the embedded endpoint, marked integration).

What the API relies on: the cap of MAX_SCHEDULES_PER_TENANT holds under any number of adds at once (it is the
write's own condition, not a count read before it: 24 parallel creates at 996 made 1,001), a delete makes room
again, a name in use is told apart from a full tenant; a schedule's params are bounded
(MAX_SCHEDULE_PARAMS_BYTES, PayloadTooLarge, nothing written); a tenant's schedules come a page at a time by
name, each page going on after the last name shown, even when that schedule was deleted in between.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from onward.domain.errors import PayloadTooLarge
from onward.domain.schedules import NewSchedule, Schedule
from onward.store.schedules import (
    MAX_SCHEDULE_PARAMS_BYTES,
    MAX_SCHEDULES_PER_TENANT,
    AddOutcome,
    DynamoSchedules,
    MemorySchedules,
    ScheduleRecorder,
)
from tests.support import put_legacy_schedules

NOW = 1_800_000_000_000


@pytest.fixture(params=["memory", pytest.param("dynamodb", marks=pytest.mark.integration)])
def schedules(request: pytest.FixtureRequest) -> ScheduleRecorder:
    if request.param == "memory":
        return MemorySchedules()
    return DynamoSchedules(request.getfixturevalue("dynamodb"), request.getfixturevalue("settings").jobs_table)


def hourly(name: str, tenant: str = "acme", params: dict[str, Any] | None = None) -> Schedule:
    return Schedule.of(tenant, NewSchedule(name=name, type="demo.echo", params=params or {}, rate="1 hour"), NOW)


def seed(schedules: ScheduleRecorder, tenant: str, names: list[str], dynamodb: Any = None,
         table: str | None = None) -> None:
    """The tenant's schedules of these names: on DynamoDB stored as a tenant's from before the counter (raw
    items, fast), the last one through `add`, which counts them once; in memory each through `add`."""
    if isinstance(schedules, DynamoSchedules):
        put_legacy_schedules(dynamodb, str(table), [hourly(name, tenant) for name in names[:-1]])
        names = names[-1:]
    for name in names:
        assert schedules.add(hourly(name, tenant)) is AddOutcome.ADDED


def listed(schedules: ScheduleRecorder, tenant: str, limit: int = 100) -> Iterator[str]:
    """Every schedule name of the tenant, page after page."""
    after: str | None = None
    while True:
        page = schedules.page(tenant, limit, after)
        yield from (schedule.name for schedule in page.schedules)
        if page.after is None:
            return
        after = page.after


def test_the_cap_holds_under_parallel_adds(request: pytest.FixtureRequest, schedules: ScheduleRecorder) -> None:
    """Catches a cap checked by counting before the write: 24 adds at once, 4 below the cap, must store exactly
    4 (a count read first lets each of them see room: 1,020 stored). A delete then makes room for exactly one
    more; a name in use stays NAME_TAKEN at the cap; the cap is per tenant."""
    on_dynamodb = isinstance(schedules, DynamoSchedules)
    seed(schedules, "acme", [f"s{number:04d}" for number in range(MAX_SCHEDULES_PER_TENANT - 4)],
         *((request.getfixturevalue("dynamodb"), request.getfixturevalue("settings").jobs_table) if on_dynamodb
           else ()))
    barrier = threading.Barrier(24)
    outcomes: list[AddOutcome] = []

    def add(number: int) -> None:
        barrier.wait()
        outcomes.append(schedules.add(hourly(f"p{number:02d}")))

    threads = [threading.Thread(target=add, args=(number,)) for number in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcome.value for outcome in outcomes) == ["added"] * 4 + ["too_many"] * 20
    assert len(list(listed(schedules, "acme"))) == MAX_SCHEDULES_PER_TENANT

    assert schedules.add(hourly("s0000")) is AddOutcome.NAME_TAKEN
    assert schedules.add(hourly("one-more")) is AddOutcome.TOO_MANY
    assert schedules.remove("acme", "s0000")
    assert schedules.add(hourly("one-more")) is AddOutcome.ADDED
    assert schedules.add(hourly("two-more")) is AddOutcome.TOO_MANY
    assert schedules.add(hourly("s0001", tenant="globex")) is AddOutcome.ADDED


def test_params_over_the_bound_are_refused_and_nothing_is_stored(schedules: ScheduleRecorder) -> None:
    """Catches a schedule stored whatever its size (26 of 256 KiB made a 6.6 MB listing, over Lambda's 6 MB),
    and a bound counted in characters where a JSON answer spends up to 6 bytes on one (`\\u00e9`)."""
    at_bound = {"x": "a" * (MAX_SCHEDULE_PARAMS_BYTES - len('{"x":""}'))}
    assert schedules.add(hourly("at-bound", params=at_bound)) is AddOutcome.ADDED
    over = {"x": "a" * (MAX_SCHEDULE_PARAMS_BYTES - len('{"x":""}') + 1)}
    escaped = {"x": "\u00e9" * (MAX_SCHEDULE_PARAMS_BYTES // 6)}  # 2 bytes of UTF-8 each, 6 in escaped JSON
    for name, params in (("over", over), ("escaped", escaped)):
        with pytest.raises(PayloadTooLarge, match=str(MAX_SCHEDULE_PARAMS_BYTES)):
            schedules.add(hourly(name, params=params))
    assert list(listed(schedules, "acme")) == ["at-bound"]
    assert schedules.add(hourly("over")) is AddOutcome.ADDED  # nothing of the refused one was kept


def test_a_tenants_schedules_come_a_page_at_a_time_by_name(schedules: ScheduleRecorder) -> None:
    """Catches a listing that is not paged, a page that repeats or skips a name, and one that cannot go on
    after a schedule deleted since it was shown."""
    names = [f"n{number}" for number in range(7)]
    for name in reversed(names):
        schedules.add(hourly(name))
    schedules.add(hourly("n3", tenant="globex"))
    first = schedules.page("acme", 3)
    assert ([s.name for s in first.schedules], first.after) == (["n0", "n1", "n2"], "n2")
    assert schedules.remove("acme", "n2")
    second = schedules.page("acme", 3, first.after)
    assert ([s.name for s in second.schedules], second.after) == (["n3", "n4", "n5"], "n5")
    last = schedules.page("acme", 3, second.after)
    assert ([s.name for s in last.schedules], last.after) == (["n6"], None)
    exact = schedules.page("acme", 6)
    assert (len(exact.schedules), exact.after) == (6, None)
    assert schedules.page("initech", 3) == ([], None)
