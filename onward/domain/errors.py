"""What the store refuses, as exceptions a caller can map to a clear answer (HTTP status, exit code)."""


class OnwardError(Exception):
    """Base of every refusal the core raises on purpose."""


class InvalidRequest(OnwardError):
    """The input breaks a rule (type name, tenant id, key, limits). Nothing was written."""


class PayloadTooLarge(InvalidRequest):
    """Params or a result would not fit in a DynamoDB item (400 KB). Nothing was written."""


class JobNotFound(OnwardError):
    """No such job for this tenant (another tenant's job is reported the same way)."""


class IdempotencyConflict(OnwardError):
    """The Idempotency-Key was already used for a different request."""

    def __init__(self, key: str, job_id: str) -> None:
        super().__init__(f"Idempotency-Key {key!r} was already used for another request (job {job_id})")
        self.job_id = job_id


class NotReplayable(OnwardError):
    """Only dead or quarantined jobs can be replayed."""


class StoreContention(OnwardError):
    """A transition kept losing races for longer than its retry budget; safe to retry later."""


class StoreInvariantViolation(OnwardError):
    """A write the design says cannot fail did (e.g. a second outbox event for one version)."""


class UnstorableValue(InvalidRequest, ValueError):
    """A document (params, a result) holds a value DynamoDB cannot store. Nothing was written."""


class UniqueKeyHeld(OnwardError):
    """Unique jobs (issue 37): the create's `unique.key` is held by another job of the tenant (`on_conflict`
    reject, or replace of a holder that is running). Nothing was written."""

    def __init__(self, key: str, job_id: str, running: bool = False) -> None:
        why = "is running, so it cannot be replaced" if running else "holds it"
        super().__init__(f"unique.key {key!r} is held: job {job_id} {why}")
        self.key = key
        self.job_id = job_id


class ConcurrencyLimitReached(OnwardError):
    """Concurrency keys (issue 37): a create with `on_overflow: cancel_newest` found its key with `limit` jobs
    running. Nothing was written."""

    def __init__(self, key: str, running: int, limit: int) -> None:
        super().__init__(f"concurrency.key {key!r} has {running} of {limit} running (on_overflow: cancel_newest)")
        self.key = key


# --- the region fence (issue 39: onward.store.region_fence) ---


class EpochRaceLost(OnwardError):
    """Raising the region epoch found it no longer at the epoch below the one asked for: another failover
    raised it first (or the epoch asked for skips one). Nothing was written."""


class RegionFenced(OnwardError):
    """A write refused because of the region epoch: the writer's epoch is not the one the row carries (a
    stale Region writing after a failover, or a row the new home has not adopted yet). Nothing was written;
    a worker treats it as a lost lease (stops reporting the attempt, never retries it)."""


class RowNotAdopted(RegionFenced):
    """A RegionFenced whose row is of an earlier epoch than the writer's: the new home has not adopted it yet
    (the store's adoption, or the fence reconciler's for a row replicated in late). A claim passes such a row;
    the reaper leaves it; anything else is refused until it is adopted."""
