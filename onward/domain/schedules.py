"""Periodic jobs (pure): a tenant's `Schedule` (a job to create on a 5-field cron in an IANA time zone, or at a
fixed rate) and when it fires.

When a schedule fires: `next_fire(schedule, after)` is its first fire time after a moment, `latest_fire(schedule,
now)` its last one at or before `now`. The scheduler (onward.maintenance.scheduler) creates a fire's job when it is due,
never ahead, and after an outage creates only the LATEST missed fire (no catch-up storm: one job, then the
next fire to come).

Cron (`minute hour day-of-month month day-of-week`, the Vixie cron dialect: `*`, `a`, `a-b`, `*/n`, `a-b/n`,
`a/n`, comma lists, JAN-DEC and SUN-SAT, 7 as Sunday; when both day fields are restricted a day matching
either fires) is evaluated on the wall clock of the schedule's time zone. Around daylight-saving changes:
a wall time that does not exist that day (the clock jumps over it) fires once, at the moment it maps to after
the jump (02:30 on a spring-forward night fires at 03:30); a wall time that occurs twice (the clock falls
back) fires once, at its first occurrence. The evaluator is written here rather than taken from croniter: the
Lambda functions ship only this project's packages and the Powertools layer, so a dependency would not be
there on AWS.

A rate (`"5 minutes"`, `"1 hour"`, `"2 days"`, at least 1 minute) fires every period from the moment the
schedule was created (its first fire is one period later), whatever the time zone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import cache, lru_cache
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import Field, StrictInt, field_validator, model_validator

from onward.domain.clock import EpochMs, iso
from onward.domain.models import JobType, NewJob, Request, StorableParams, TenantId
from onward.domain.text_patterns import SCHEDULE_NAME

ScheduleName = Annotated[str, SCHEDULE_NAME.constraints()]
MINUTE_MS = 60_000
MIN_RATE_MS = MINUTE_MS
MAX_RATE_MS = 366 * 86_400_000
_SEARCH_DAYS = 366 * 8 + 2  # Feb 29 on a Monday recurs within 28 years; a spec matching nothing in 8 is refused
# ASCII only: Python's \d, \s and int() take any script's digits and spaces ("１ minute"), and IGNORECASE
# without re.ASCII folds "ſ" to "s"
_RATE = re.compile(r"[ \t]*([0-9]{1,6})[ \t]+(minute|minutes|hour|hours|day|days)[ \t]*", re.IGNORECASE | re.ASCII)
_CRON_TEXT = re.compile(r"[0-9A-Za-z*,/ \t-]*")  # the same for cron (isdigit() and upper() take Unicode too)
# Files of the zone database that are no IANA zone name: the host's own zone (whatever it is), tzdata's
# placeholder zone "-00", and the rules file of POSIX TZ strings
_NOT_ZONES = frozenset({"localtime", "Factory", "posixrules"})
_UNIT_MS = {"minute": MINUTE_MS, "hour": 60 * MINUTE_MS, "day": 24 * 60 * MINUTE_MS}
_MONTHS = {name: number for number, name in enumerate(
    ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], start=1)}
_WEEKDAYS = {name: number for number, name in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}


# --- cron -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CronSpec:
    """A parsed 5-field cron expression: the allowed values of each field (weekday 0 = Sunday)."""

    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_restricted: bool  # day-of-month was not `*`
    weekdays_restricted: bool  # day-of-week was not `*`

    def matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_days = day.day in self.days
        in_weekdays = (day.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_days or in_weekdays  # Vixie cron: either day field
        return in_days and in_weekdays


def _field(text: str, low: int, high: int, names: dict[str, int], what: str) -> tuple[frozenset[int], bool]:
    """One cron field's allowed values, and whether it restricts anything (it is not a bare `*`)."""
    values: set[int] = set()

    def number(token: str) -> int:
        token = token.upper()
        if token in names:
            return names[token]
        if not token.isdigit():
            raise ValueError(f"{what}: {token!r} is not a number from {low} to {high}")
        value = int(token)
        if what == "day of week" and value == 7:
            return 0
        if not low <= value <= high:
            raise ValueError(f"{what}: {value} is outside {low} to {high}")
        return value

    for part in text.split(","):
        if not part:
            raise ValueError(f"{what}: an empty item in {text!r}")
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise ValueError(f"{what}: the step {step_text!r} is not a positive number")
            step = int(step_text)
        if base == "*":
            start, end = low, high
        elif "-" in base:
            first, _, last = base.partition("-")
            start, end = number(first), number(last)
            if what == "day of week" and last == "7":
                end = 7  # SUN-7 / 5-7: up to Sunday
            if start > end:
                raise ValueError(f"{what}: the range {base!r} runs backwards")
        else:
            start = number(base)
            end = high if step_text else start
        values |= {value % 7 if what == "day of week" else value for value in range(start, end + 1, step)}
    return frozenset(values), text != "*"


@lru_cache(maxsize=1024)
def parse_cron(expression: str) -> CronSpec:
    """A 5-field cron expression; ValueError naming the field and why when it is not one (or never fires)."""
    if not _CRON_TEXT.fullmatch(expression):
        raise ValueError(f"{expression!r} is not a cron expression: it is written in ASCII digits 0-9, the names "
                         "JAN-DEC and SUN-SAT, '*', ',', '-', '/' and spaces")
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"a cron expression has 5 fields (minute hour day-of-month month day-of-week), not "
                         f"{len(fields)}: {expression!r}")
    minutes, _ = _field(fields[0], 0, 59, {}, "minute")
    hours, _ = _field(fields[1], 0, 23, {}, "hour")
    days, days_restricted = _field(fields[2], 1, 31, {}, "day of month")
    months, _ = _field(fields[3], 1, 12, _MONTHS, "month")
    weekdays, weekdays_restricted = _field(fields[4], 0, 7, _WEEKDAYS, "day of week")
    spec = CronSpec(tuple(sorted(minutes)), tuple(sorted(hours)), days, months, weekdays, days_restricted,
                    weekdays_restricted)
    start = date(2000, 1, 1)
    if not any(spec.matches(start + timedelta(days=offset)) for offset in range(_SEARCH_DAYS)):
        raise ValueError(f"{expression!r} names no day that exists (such as 30 February)")
    return spec


def _day_fires(spec: CronSpec, day: date, zone: ZoneInfo) -> list[EpochMs]:
    """The moments the spec fires on one local day, ascending, each once (see the module's DST rules)."""
    if not spec.matches(day):
        return []
    moments = set()
    for hour in spec.hours:
        for minute in spec.minutes:
            local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)  # fold=0: the first
            moments.add(int(local.timestamp()) * 1000)
    return sorted(moments)


def _cron_next(spec: CronSpec, zone: ZoneInfo, after: EpochMs) -> EpochMs:
    day = datetime.fromtimestamp(after / 1000, tz=zone).date() - timedelta(days=1)
    for offset in range(_SEARCH_DAYS):
        for moment in _day_fires(spec, day + timedelta(days=offset), zone):
            if moment > after:
                return moment
    raise ValueError("the schedule never fires")  # parse_cron refuses such a spec


def _cron_latest(spec: CronSpec, zone: ZoneInfo, at: EpochMs) -> EpochMs | None:
    day = datetime.fromtimestamp(at / 1000, tz=zone).date() + timedelta(days=1)
    for offset in range(_SEARCH_DAYS):
        for moment in reversed(_day_fires(spec, day - timedelta(days=offset), zone)):
            if moment <= at:
                return moment
    return None


# --- rate -----------------------------------------------------------------------------------------------------

def parse_rate(text: str) -> int:
    """`"5 minutes"`, `"1 hour"`, `"2 days"` as milliseconds; ValueError below 1 minute or above 366 days."""
    match = _RATE.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a rate such as '5 minutes', '1 hour' or '2 days'")
    period = int(match.group(1)) * _UNIT_MS[match.group(2).lower().removesuffix("s")]
    if not MIN_RATE_MS <= period <= MAX_RATE_MS:
        raise ValueError("a rate is at least 1 minute and at most 366 days")
    return period


def check_timezone(name: str) -> ZoneInfo:
    """The zone of an IANA time zone name (`iana_zones`); ValueError for any other name."""
    try:
        if name not in iana_zones():
            raise ValueError(name)
        return _zone(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a key naming a directory, on some systems
        raise ValueError(f"{name!r} is not an IANA time zone such as 'UTC' or 'Europe/Paris'") from None


@cache
def iana_zones() -> frozenset[str]:
    """The time zones a schedule may name: the IANA zone names of the zone database (zoneinfo's
    available_timezones(): the tzdata package's, else the host's, without its posix/ and right/ copies), but
    for the files that name no zone (_NOT_ZONES). Exact names: `europe/paris` is none, even where the file
    system would open it."""
    return frozenset(available_timezones()) - _NOT_ZONES


@lru_cache(maxsize=256)
def _zone(name: str) -> ZoneInfo:
    if not name or name.startswith(("/", ".")) or ".." in name:
        raise ValueError(name)
    return ZoneInfo(name)


# --- the schedule ---------------------------------------------------------------------------------------------

class _Timing(Request):
    cron: str | None = Field(None, max_length=200, description="5-field cron (minute hour day-of-month month "
                             "day-of-week) on the wall clock of `timezone`; not with rate")
    rate: str | None = Field(None, max_length=40, description="a fixed period from creation: '5 minutes', "
                             "'1 hour', '2 days' (at least 1 minute); not with cron")
    timezone: str = Field("UTC", max_length=64, description="IANA time zone the cron is evaluated in")

    @field_validator("cron")
    @classmethod
    def _cron(cls, cron: str | None) -> str | None:
        if cron is not None:
            parse_cron(cron)
        return cron

    @field_validator("rate")
    @classmethod
    def _rate(cls, rate: str | None) -> str | None:
        if rate is not None:
            parse_rate(rate)
        return rate

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, timezone: str) -> str:
        check_timezone(timezone)
        return timezone

    @model_validator(mode="after")
    def _one_timing(self) -> _Timing:
        if (self.cron is None) == (self.rate is None):
            raise ValueError("give exactly one of cron and rate")
        return self


class NewSchedule(_Timing):
    """What a tenant asks for: a job (as POST /jobs takes it, without a start time) to create on a timing."""

    name: ScheduleName = Field(description="unique within the tenant; 1 to 64 letters, digits, `_`, `.`, `-`")
    type: JobType
    params: StorableParams = Field(default_factory=dict)
    max_attempts: StrictInt | None = Field(None, ge=1, le=100, description="each job's (default: its job type's "
                                                                         "retry policy's, else 3)")
    priority: StrictInt | None = Field(None, ge=0, le=9, description="each job's (default 0)")


class Schedule(NewSchedule):
    """A tenant's stored schedule: what it was created with, when, and its next fire time."""

    tenant_id: TenantId
    created_at: EpochMs
    next_fire_at: EpochMs

    @classmethod
    def of(cls, tenant_id: str, request: NewSchedule, now: EpochMs) -> Schedule:
        """A new schedule, created `now`: its first fire is the first fire time after now."""
        fields: dict[str, Any] = {**request.model_dump(), "tenant_id": tenant_id, "created_at": now,
                                  "next_fire_at": now}
        draft = cls.model_construct(**fields)
        return cls.model_validate({**fields, "next_fire_at": next_fire(draft, now)})

    def job(self) -> NewJob:
        """The job each fire creates."""
        extra = {name: getattr(self, name) for name in ("max_attempts", "priority") if getattr(self, name) is not None}
        return NewJob(type=self.type, params=self.params, **extra)

    def idempotency_key(self, fire_at: EpochMs) -> str:
        """The Idempotency-Key of the fire at `fire_at`: one job per schedule and fire time, however many
        schedulers tick. The schedule's creation time tells a schedule from an earlier one of the same name."""
        return f"schedule:{self.name}:{self.created_at}:{iso(fire_at)}"


def next_fire(schedule: Schedule, after: EpochMs) -> EpochMs:
    """The schedule's first fire time strictly after `after`."""
    if schedule.rate is not None:
        period = parse_rate(schedule.rate)
        if after < schedule.created_at:
            return schedule.created_at + period
        return schedule.created_at + ((after - schedule.created_at) // period + 1) * period
    assert schedule.cron is not None
    return _cron_next(parse_cron(schedule.cron), _zone(schedule.timezone), after)


def latest_fire(schedule: Schedule, at: EpochMs) -> EpochMs | None:
    """The schedule's last fire time at or before `at` (None: it has not fired yet by then)."""
    if schedule.rate is not None:
        period = parse_rate(schedule.rate)
        if at < schedule.created_at + period:
            return None
        return schedule.created_at + (at - schedule.created_at) // period * period
    assert schedule.cron is not None
    moment = _cron_latest(parse_cron(schedule.cron), _zone(schedule.timezone), at)
    return moment if moment is not None and moment > schedule.created_at else None


def fires_between(schedule: Schedule, after: EpochMs, until: EpochMs, limit: int = 10_000) -> list[EpochMs]:
    """The fire times in (after, until], ascending, at most `limit`."""
    if until <= after:
        return []
    if schedule.rate is not None:
        first = next_fire(schedule, after)
        period = parse_rate(schedule.rate)
        return list(range(first, until + 1, period)[:limit])
    assert schedule.cron is not None
    spec, zone = parse_cron(schedule.cron), _zone(schedule.timezone)
    day = datetime.fromtimestamp(after / 1000, tz=zone).date() - timedelta(days=1)
    last = datetime.fromtimestamp(until / 1000, tz=zone).date() + timedelta(days=1)
    found: list[EpochMs] = []
    while day <= last and len(found) < limit:
        found.extend(moment for moment in _day_fires(spec, day, zone) if after < moment <= until)
        day += timedelta(days=1)
    return found[:limit]


def due_fire(schedule: Schedule, now: EpochMs) -> tuple[EpochMs, int] | None:
    """What a tick at `now` creates for a schedule: the latest fire time that is due (at or before now, not
    before its stored next_fire_at) and how many earlier due fires it stands for (skipped: missed during an
    outage, counted up to 10,000); None when nothing is due."""
    if schedule.next_fire_at > now:
        return None
    latest = latest_fire(schedule, now)
    if latest is None or latest < schedule.next_fire_at:  # cannot happen for a next_fire_at we computed
        return schedule.next_fire_at, 0
    skipped = len(fires_between(schedule, schedule.next_fire_at - 1, latest - 1))
    return latest, skipped

