"""Queue depth and age per tenant and job type, for the OpenTelemetry gauges (onward.observability.metrics).

The ready queues are per tenant and priority band, not per type, and no counter is kept per type (that would
be one more counter on every create and claim). So the backlog count (onward.maintenance.backlog), when asked
for types, reads the head of each band with due jobs: at most TYPE_SAMPLE of its due jobs, earliest due first
(one Query of the `ready` index). A band holding no more due jobs than that is counted exactly by type; a
larger one is split in the proportions of its head (the next jobs to run), scaled to its due count. Each
type's age is its earliest due job's wait in the head (exact for every type found there).

Cardinality is bounded: per tenant the TOP_TYPES types with the most due jobs, the rest summed as OTHER (and
a band's due jobs whose types were not read at all, as the head of an index read a moment after its count can
be short, count as OTHER too). The tenant's total is the tenant's due count, exactly as without types."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from onward.domain.clock import EpochMs

TYPE_SAMPLE = 100  # due jobs read per band with work for their types
TOP_TYPES = 10  # types shown per tenant; the rest are OTHER
OTHER = "other"


@dataclass(frozen=True)
class DueHead:
    """One band's due count and the (type, due at) of its first due jobs, earliest first."""

    due: int
    head: list[tuple[str, EpochMs]]


@dataclass(frozen=True)
class TypeDepth:
    due: int
    oldest_due_age_s: float | None  # None: none of its jobs was in a head read (OTHER's unread part)


def _largest_remainder(counts: dict[str, int], total: int) -> dict[str, int]:
    """`counts` scaled to sum to `total`, each rounded so that the sum is exact (Hamilton's method)."""
    sampled = sum(counts.values())
    if sampled == 0:
        return {}
    shares = {name: count * total / sampled for name, count in counts.items()}
    floors = {name: int(share) for name, share in shares.items()}
    left = total - sum(floors.values())
    for name in sorted(shares, key=lambda n: (floors[n] - shares[n], n))[:left]:
        floors[name] += 1
    return floors


def by_type(heads: Iterable[DueHead], now: EpochMs, top: int = TOP_TYPES) -> dict[str, TypeDepth]:
    """One tenant's due jobs per type (TOP_TYPES of them, then OTHER) from its bands' heads."""
    due: dict[str, int] = {}
    oldest: dict[str, EpochMs] = {}
    for band in heads:
        seen: dict[str, int] = {}
        for job_type, due_at in band.head[:band.due]:
            seen[job_type] = seen.get(job_type, 0) + 1
            oldest[job_type] = min(due_at, oldest.get(job_type, due_at))
        counted = _largest_remainder(seen, band.due) if len(band.head) < band.due else seen
        for job_type, count in counted.items():
            due[job_type] = due.get(job_type, 0) + count
        unread = band.due - sum(counted.values())
        if unread > 0:
            due[OTHER] = due.get(OTHER, 0) + unread
    ranked = sorted((name for name in due if name != OTHER), key=lambda name: (-due[name], name))
    shown, rest = ranked[:top], ranked[top:]
    answer = {name: TypeDepth(due[name], _age_s(now, oldest.get(name))) for name in shown if due[name] > 0}
    other_due = due.get(OTHER, 0) + sum(due[name] for name in rest)
    if other_due > 0:
        other_oldest = [oldest[name] for name in rest if name in oldest]
        answer[OTHER] = TypeDepth(other_due, _age_s(now, min(other_oldest)) if other_oldest else None)
    return answer


def _age_s(now: EpochMs, due_at: EpochMs | None) -> float | None:
    return None if due_at is None else max(0.0, (now - due_at) / 1000)
