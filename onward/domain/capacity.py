"""Lag, drain time and retention arithmetic for a stream consumer (pure).

The brief's model: a consumer with `slots` writes in flight, each taking `write_ms`, has a ceiling of
slots / write time. When arrivals exceed it, a backlog grows; once writes recover, the spare throughput
(recovered ceiling - arrivals) drains it. If an outage (no completions at all) follows the observation,
arrivals keep coming during it. The retention envelope is how long the oldest event must stay replayable:
its age when the backlog was observed + the outage + the drain after it. Keep outbox and stream retention
above it, with margin.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Workload:
    arrival_rate: float  # events/s arriving
    slots: int  # writes in flight
    write_ms: float  # per write while degraded
    recovered_write_ms: float  # per write once recovered
    observed_after_s: float  # how long the backlog had been growing when observed (age of the oldest)
    outage_s: float = 0.0  # a following outage with zero completions (e.g. a failover)

    def __post_init__(self) -> None:
        if self.slots < 1 or self.write_ms <= 0 or self.recovered_write_ms <= 0:
            raise ValueError("slots must be >= 1 and write times > 0")
        if self.arrival_rate < 0 or self.observed_after_s < 0 or self.outage_s < 0:
            raise ValueError("rates and durations cannot be negative")


@dataclass(frozen=True)
class CapacityReport:
    ceiling_per_s: float  # slots / write time while degraded
    growth_per_s: float  # arrivals - ceiling (0 when the ceiling keeps up)
    backlog_at_observation: float  # events waiting when observed
    recovered_ceiling_per_s: float
    spare_per_s: float  # recovered ceiling - arrivals
    drain_s: float | None  # time to drain the observed backlog after recovery (None: never drains)
    outage_arrivals: float  # events that arrive during the outage
    backlog_after_outage: float
    drain_after_outage_s: float | None
    retention_envelope_s: float | None  # oldest age + outage + drain after it (None: unbounded)

    def as_dict(self) -> dict[str, float | None]:
        return asdict(self)


UNITS = {
    "ceiling_per_s": "events/s", "growth_per_s": "events/s", "backlog_at_observation": "events",
    "recovered_ceiling_per_s": "events/s", "spare_per_s": "events/s", "drain_s": "s",
    "outage_arrivals": "events", "backlog_after_outage": "events", "drain_after_outage_s": "s",
    "retention_envelope_s": "s",
}


def ceiling(slots: int, write_ms: float) -> float:
    """The most writes per second `slots` concurrent writes of `write_ms` each can complete."""
    return slots / (write_ms / 1000)


def drain_time(backlog: float, spare_per_s: float) -> float | None:
    """Seconds to drain `backlog` with `spare_per_s` of spare throughput; None if it never drains."""
    if backlog <= 0:
        return 0.0
    return backlog / spare_per_s if spare_per_s > 0 else None


def assess(workload: Workload) -> CapacityReport:
    degraded = ceiling(workload.slots, workload.write_ms)
    growth = max(0.0, workload.arrival_rate - degraded)
    backlog = growth * workload.observed_after_s
    recovered = ceiling(workload.slots, workload.recovered_write_ms)
    spare = recovered - workload.arrival_rate
    outage_arrivals = workload.arrival_rate * workload.outage_s
    after_outage = backlog + outage_arrivals
    drain_after = drain_time(after_outage, spare)
    envelope = None if drain_after is None else workload.observed_after_s + workload.outage_s + drain_after
    return CapacityReport(
        ceiling_per_s=degraded,
        growth_per_s=growth,
        backlog_at_observation=backlog,
        recovered_ceiling_per_s=recovered,
        spare_per_s=spare,
        drain_s=drain_time(backlog, spare),
        outage_arrivals=outage_arrivals,
        backlog_after_outage=after_outage,
        drain_after_outage_s=drain_after,
        retention_envelope_s=envelope,
    )
