"""The scheduler: each tick creates the jobs of the schedules that are due (onward.domain.schedules) and moves each one
to its next fire time.

A due schedule fires ONE job, for its latest due fire time: fires missed while no scheduler ran (an outage,
a paused stack) are not made up one by one; the latest stands for them (`FireReport.skipped` counts the others),
then the schedule waits for its next fire to come. The job is created through JobStore.create with the
Idempotency-Key `schedule:<name>:<created_at>:<fire time>` (Schedule.idempotency_key), so a second scheduler
ticking at the same moment, or a tick retried after a crash between the create and the advance, gets the same
job back instead of a second one. The job is an ordinary job of the schedule's tenant: queued at once, claimed
in its tenant's fair share like any other.

On AWS an EventBridge rule runs onward/entrypoints/scheduler.py every minute; locally `onward up` ticks a thread
(infra/onward_infra/platform.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from onward.domain.clock import Clock, EpochMs, iso, system_clock
from onward.domain.errors import OnwardError
from onward.domain.schedules import due_fire, next_fire
from onward.runtime import authority
from onward.store.schedules import ScheduleRecorder
from onward.store.service import JobStore

logger = logging.getLogger(__name__)

MAX_PER_TICK = 500  # schedules fired per tick; the most overdue first, the rest on the next tick


@dataclass
class FireReport:
    """What one tick did."""

    fired: list[tuple[str, str, EpochMs, str]] = field(default_factory=list)  # (tenant, name, fire time, job id)
    repeated: int = 0  # fires whose job another scheduler (or an earlier try) had created: answered, not created
    skipped: int = 0  # earlier due fires the latest one stood for (missed while no scheduler ran)
    lost: int = 0  # schedules another scheduler advanced first
    failed: int = 0  # schedules whose job could not be created (tried again next tick)


class Scheduler:
    """Fires due schedules into a JobStore. Safe to run in several processes at once."""

    def __init__(self, store: JobStore, schedules: ScheduleRecorder, clock: Clock = system_clock,
                 limit: int = MAX_PER_TICK) -> None:
        self._store = store
        self._schedules = schedules
        self._clock = clock
        self._limit = limit

    def tick(self, now: EpochMs | None = None) -> FireReport:
        at = self._clock() if now is None else now
        report = FireReport()
        if not authority.is_home(self._store):  # issue 39: only the home Region fires schedules
            return report
        for schedule in self._schedules.due(at, self._limit):
            due = due_fire(schedule, at)
            if due is None:
                continue
            fire_at, skipped = due
            try:
                created = self._store.create(schedule.tenant_id, schedule.job(),
                                             idempotency_key=schedule.idempotency_key(fire_at))
            except OnwardError as error:  # contention, or a job the store refuses: the next tick tries again
                report.failed += 1
                logger.warning("schedule %s/%s: the fire at %s created no job: %s", schedule.tenant_id,
                               schedule.name, iso(fire_at), error)
                continue
            if not self._schedules.advance(schedule, next_fire(schedule, at)):
                report.lost += 1
            if created.created:
                report.fired.append((schedule.tenant_id, schedule.name, fire_at, created.job.job_id))
                report.skipped += skipped
                logger.info("schedule %s/%s fired at %s: job %s%s", schedule.tenant_id, schedule.name,
                            iso(fire_at), created.job.job_id,
                            f" ({skipped} missed fires before it skipped)" if skipped else "")
            else:
                report.repeated += 1
        return report
