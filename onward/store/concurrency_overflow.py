"""A create's overflow strategy on its concurrency key (issue 37, item 2): what `on_overflow` does before the job is
created. `queue` (the default) reads nothing: the job waits for a slot like any other. The two others read the
key's item (one strongly consistent GetItem):

- `cancel_newest`: the key has `limit` running: the create is refused (ConcurrencyLimitReached, a 409), nothing
  written;
- `cancel_oldest_queued`: jobs of the key wait held aside for a slot (`held` > 0): the oldest of them (by due
  time) is cancelled through the store's ordinary cancel, then the new job is created (and waits in turn).

Neither is a condition of the create's transaction: a slot taken or given back between the read and the create
is not seen (the key's limit itself is never passed: that is the claim's condition). A create with an
Idempotency-Key already used skips them (its retry answers the job the first request made; it must not cancel
another job, or be refused, the second time).
"""

from __future__ import annotations

from collections.abc import Callable

from onward.domain.concurrency import hold_key
from onward.domain.errors import ConcurrencyLimitReached
from onward.domain.models import NewJob
from onward.store.answers import CancelOutcome, CancelStatus
from onward.store.held_jobs import HeldJobs
from onward.store.ports.recorder import JobRecorder

OLDEST_READ = 4  # held entries read to find the oldest still waiting (one cancelled meanwhile is passed)


def apply_overflow(tenant_id: str, request: NewJob, idempotency_key: str | None, recorder: JobRecorder,
                   book: HeldJobs, cancel: Callable[[str, str], CancelOutcome]) -> str | None:
    """Apply the create's overflow strategy: the id of the job it cancelled (cancel_oldest_queued), else None;
    ConcurrencyLimitReached when a `cancel_newest` create must be refused. Reads nothing for `queue` (the
    default) or no key: such a create costs what it did."""
    rule = request.concurrency
    if rule is None or rule.on_overflow == "queue":
        return None
    if idempotency_key is not None and recorder.idempotency(tenant_id, idempotency_key) is not None:
        return None  # a retry: the create answers the job its first request made
    count = recorder.key_count(tenant_id, rule.key)
    if rule.on_overflow == "cancel_newest":
        if count.running >= rule.limit:
            raise ConcurrencyLimitReached(rule.key, count.running, rule.limit)
        return None
    if count.held <= 0:
        return None
    for held in book.held(hold_key(rule.key), tenant_id, OLDEST_READ):
        if cancel(held.job_id, tenant_id).status is CancelStatus.CANCELLED:
            return held.job_id
    return None
