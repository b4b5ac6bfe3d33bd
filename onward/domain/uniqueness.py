"""Unique jobs (issue 37, item 1), pure: what a create's `unique` asks for, what a unique key's item holds, and
what a create answers when the key is held. The store enforces the answer with its transaction's conditions
(onward.store.unique_keys); this module only decides.

A tenant's unique key is held by one job: for `window_s` seconds from that job's creation whatever becomes of
it (the window mode), or, with no `window_s`, while the job has not finished (any terminal state frees it).
A key whose holder's row is gone (its retention ended) is free too.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from onward.domain.clock import EpochMs
from onward.domain.states import JobState, is_terminal
from onward.domain.text_patterns import UNIQUE_KEY

MIN_WINDOW_S = 1
MAX_WINDOW_S = 30 * 86_400  # 30 days
WAITING_STATES = frozenset({JobState.QUEUED, JobState.RETRY_WAIT})  # what `replace` cancels

OnConflict = Literal["keep", "reject", "replace"]


class UniqueRule(BaseModel):
    """`unique` on POST /jobs: at most one job of the tenant holds `key` at a time."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    key: Annotated[str, UNIQUE_KEY.constraints()] = Field(
        description="the tenant's unique key: 1 to 200 printable ASCII characters")
    window_s: StrictInt | None = Field(
        default=None, ge=MIN_WINDOW_S, le=MAX_WINDOW_S,
        description="seconds (1 to 2,592,000: 30 days) the key stays held from the holder's creation, whatever "
                    "becomes of the holder; omitted: held while the holder has not finished (any terminal state "
                    "frees it)")
    on_conflict: OnConflict = Field(
        default="keep",
        description="when the key is held: `keep` answers the holder (200, `duplicate_of_unique: true`); "
                    "`reject` answers 409 naming unique.key and the holder; `replace` cancels a holder that has "
                    "not started (queued, retry_wait) and creates the new job, 409 like `reject` when the holder "
                    "is running")

    def held_until(self, created_at: EpochMs) -> EpochMs | None:
        """Until when a job created at `created_at` holds the key; None: while it has not finished."""
        return None if self.window_s is None else created_at + self.window_s * 1000


@dataclass(frozen=True)
class UniqueHold:
    """What a unique key's item says: the job holding it, and until when (None: while it has not finished)."""

    job_id: str
    held_until: EpochMs | None = None

    def expired(self, now: EpochMs) -> bool:
        return self.held_until is not None and self.held_until <= now


class Verdict(StrEnum):
    """What a create whose unique key was found held does next."""

    TAKE = "take"  # the key is free (window over, holder finished or gone): the create takes it over
    DUPLICATE = "duplicate"  # keep: answer the holder, create nothing
    REJECT = "reject"  # 409 naming unique.key and the holder
    REPLACE = "replace"  # cancel the waiting holder, then take the key over


def judge_hold(rule: UniqueRule, hold: UniqueHold | None, holder_state: JobState | None, now: EpochMs) -> Verdict:
    """What a create with `rule` does about the key's `hold` (None: no item), whose holder is in
    `holder_state` (None: its row is gone), at `now`."""
    if hold is None or hold.expired(now) or holder_state is None:
        return Verdict.TAKE
    finished = is_terminal(holder_state)
    if hold.held_until is None and finished:
        return Verdict.TAKE
    if rule.on_conflict == "keep":
        return Verdict.DUPLICATE
    if rule.on_conflict == "reject":
        return Verdict.REJECT
    if holder_state in WAITING_STATES:
        return Verdict.REPLACE
    return Verdict.TAKE if finished else Verdict.REJECT  # replace: a finished holder is left as it is
