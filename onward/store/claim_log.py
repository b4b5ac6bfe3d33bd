"""The claims the outbox records, as operator reads count them (onward.operator.claim_history): every claim
commits one outbox event whose status is `running`. `ClaimLog` is what a backend answers
(onward.store.dynamo.claim_log reads the outbox's `by_time` index)."""

from __future__ import annotations

from typing import NamedTuple, Protocol

from onward.domain.clock import EpochMs


class ClaimsRead(NamedTuple):
    """The claims found, each (tenant id, when it was decided), how many outbox entries were read for them, and
    whether every entry of the window was read."""

    claims: list[tuple[str, EpochMs]]
    examined: int
    complete: bool


class ClaimLog(Protocol):
    def claims(self, since: EpochMs, until: EpochMs, *, max_examined: int,
               tenant_id: str | None = None) -> ClaimsRead:
        """The claims decided from `since` (and possibly some after `until`: the caller filters), every
        tenant's or only `tenant_id`'s, reading at most `max_examined` outbox entries."""
