"""Rebuild the status view from the outbox alone, and compare it with the live view."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from onward.domain.models import OutboxEvent, StatusView
from onward.domain.projection import digest, fold

COMPARED = ("tenant_id", "type", "status", "version", "attempt", "cancel_requested", "occurred_at", "digest")


@dataclass
class ViewDiff:
    jobs: int = 0
    missing: list[str] = field(default_factory=list)  # in the outbox, not in the view
    extra: list[str] = field(default_factory=list)  # in the view, not in the outbox
    different: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not (self.missing or self.extra or self.different)


def compare(events: Iterable[OutboxEvent], live: Iterable[StatusView]) -> ViewDiff:
    """The view the outbox implies (each job's highest version) against the live one, field by field."""
    rebuilt = fold(events)
    views = {view.job_id: view for view in live}
    diff = ViewDiff(jobs=len(rebuilt))
    for job_id, event in rebuilt.items():
        view = views.get(job_id)
        if view is None:
            diff.missing.append(job_id)
            continue
        expected = {"tenant_id": event.tenant_id, "type": event.type, "status": event.status,
                    "version": event.version, "attempt": event.attempt, "cancel_requested": event.cancel_requested,
                    "occurred_at": event.occurred_at, "digest": digest(event)}
        if any(getattr(view, name) != expected[name] for name in COMPARED):
            diff.different.append(job_id)
    diff.extra = sorted(set(views) - set(rebuilt))
    return diff
