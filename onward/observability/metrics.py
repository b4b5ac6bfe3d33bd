"""The platform's figures as OpenTelemetry metrics, beside the same figures sent to CloudWatch by Powertools
(onward.telemetry, the entry points): a team on Prometheus or Honeycomb sees what the alarms see. No-ops when
OTLP is off (onward.observability.otlp).

- `onward.queue.depth` (gauge, {job}): waiting jobs due now, by onward.tenant.id and onward.job.type (as
  BacklogDue, the reaper; the types of onward.maintenance.backlog_types: a tenant's top types, then `other`)
- `onward.queue.age` (gauge, s): the oldest due job's wait, by onward.tenant.id and onward.job.type
- `onward.queue.oldest_due_age` (gauge, s): the oldest due job's wait at the head of the claim order (as
  OldestDueAgeSeconds)
- `onward.jobs.running` (gauge, {job}): jobs running under a lease (as JobsRunning)
- `onward.attempts` (counter, {attempt}): attempts ended, by onward.tenant.id, onward.job.type and
  onward.attempt.outcome (the workers; JobsRun counts them without the breakdown)
- `onward.jobs.created` (counter, {job}): jobs created, by onward.tenant.id and onward.job.type (as JobsCreated)
- `onward.projection.lag` (gauge, ms): a projector batch's largest lag from commit to view, by onward.shard.id
  (as ProjectionLag)"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from onward.maintenance.backlog_types import OTHER, TypeDepth
from onward.observability.otlp import Providers, providers
from onward.observability.tracing import JOB_TYPE, OUTCOME, TENANT_ID

SHARD_ID = "onward.shard.id"

# by meter (the object itself: a test installs a meter per test, and an id could be reused)
_instruments: dict[tuple[Any, str], Any] = {}
_lock = threading.Lock()
# a (tenant, type) whose queue emptied is set to 0, not left at its last depth
_series_with_depth: dict[Any, set[tuple[str, str]]] = {}


def _instrument(recorder: Providers, name: str) -> Any:
    """One instrument per name and meter (an SDK warns when one is created twice)."""
    key = (recorder.meter, name)
    with _lock:
        if key not in _instruments:
            kind, unit, description = _SPECS[name]
            create = getattr(recorder.meter, f"create_{kind}")
            _instruments[key] = create(name, unit=unit, description=description)
        return _instruments[key]


_SPECS: dict[str, tuple[str, str, str]] = {
    "onward.queue.depth": ("gauge", "{job}", "waiting jobs due now"),
    "onward.queue.age": ("gauge", "s", "the oldest due job's wait, by tenant and type"),
    "onward.queue.oldest_due_age": ("gauge", "s", "the oldest due job's wait at the head of the claim order"),
    "onward.jobs.running": ("gauge", "{job}", "jobs running under a lease"),
    "onward.attempts": ("counter", "{attempt}", "attempts ended, by outcome"),
    "onward.jobs.created": ("counter", "{job}", "jobs created"),
    "onward.projection.lag": ("gauge", "ms", "a projector batch's largest lag from commit to the status view"),
}


def record_attempt(tenant_id: str, job_type: str, outcome: str) -> None:
    recorder = providers()
    if recorder is not None:
        _instrument(recorder, "onward.attempts").add(1, {TENANT_ID: tenant_id, JOB_TYPE: job_type,
                                                         OUTCOME: outcome})


def record_created(tenant_id: str, job_type: str, count: int = 1) -> None:
    recorder = providers()
    if recorder is not None and count:
        _instrument(recorder, "onward.jobs.created").add(count, {TENANT_ID: tenant_id, JOB_TYPE: job_type})


def exporting() -> bool:
    """Whether figures are exported (a caller skips reads made only for them when not)."""
    return providers() is not None


def record_backlog(due_by_tenant: Mapping[str, int], running: int, oldest_due_age_s: float,
                   due_by_type: Mapping[str, Mapping[str, TypeDepth]] | None = None) -> None:
    """The reaper's figures. `due_by_type` (tenant -> type -> depth and age): the depth by tenant and type; a
    tenant missing from it is recorded under the type `other`. A series seen before and absent now is set to
    0 (a gauge keeps its last value: a drained queue would read as full forever)."""
    recorder = providers()
    if recorder is None:
        return
    types = due_by_type or {}
    points: dict[tuple[str, str], tuple[int, float | None]] = {}
    for tenant_id, due in due_by_tenant.items():
        if not types.get(tenant_id) and due == 0:
            continue  # only jobs not due yet: no series (one seen before is set to 0 below)
        for job_type, depth in (types.get(tenant_id) or {OTHER: TypeDepth(due, None)}).items():
            points[(tenant_id, job_type)] = (depth.due, depth.oldest_due_age_s)
    depth_gauge = _instrument(recorder, "onward.queue.depth")
    age_gauge = _instrument(recorder, "onward.queue.age")
    with _lock:
        seen = _series_with_depth.setdefault(recorder.meter, set())
        series = sorted(seen | set(points))
        seen.update(points)
    for tenant_id, job_type in series:
        due, age_s = points.get((tenant_id, job_type), (0, 0.0))
        attributes = {TENANT_ID: tenant_id, JOB_TYPE: job_type}
        depth_gauge.set(due, attributes)
        if age_s is not None:
            age_gauge.set(age_s, attributes)
    _instrument(recorder, "onward.jobs.running").set(running)
    _instrument(recorder, "onward.queue.oldest_due_age").set(oldest_due_age_s)


def record_projection_lag(shard_id: str, lag_ms: float) -> None:
    recorder = providers()
    if recorder is not None:
        _instrument(recorder, "onward.projection.lag").set(lag_ms, {SHARD_ID: shard_id})
