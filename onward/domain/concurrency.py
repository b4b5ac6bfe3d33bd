"""Concurrency keys (issue 37, item 2), pure: what a create's `concurrency` asks for, what a key's item
counts, and how `explain` says a job waits on its key. The store enforces the limit with its transactions'
conditions (onward.store.concurrency_keys); this module only describes.

A job naming `{"key": K, "limit": N}` starts only while fewer than N jobs of its tenant with key K run; one
that finds the key at its limit is held aside (onward.store.held_jobs, hold key `concurrency#<K>`) and put
back in its queue, at its due time, by the end of an attempt of the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from onward.domain.text_patterns import CONCURRENCY_KEY

MAX_CONCURRENCY_LIMIT = 10_000
HOLD_PREFIX = "concurrency#"

OnOverflow = Literal["queue", "cancel_newest", "cancel_oldest_queued"]


class ConcurrencyRule(BaseModel):
    """`concurrency` on POST /jobs: at most `limit` jobs of the tenant with `key` run at once."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    key: Annotated[str, CONCURRENCY_KEY.constraints()] = Field(
        description="the tenant's concurrency key: 1 to 200 printable ASCII characters")
    limit: StrictInt = Field(ge=1, le=MAX_CONCURRENCY_LIMIT,
                             description=f"jobs of the key running at once at most (1 to {MAX_CONCURRENCY_LIMIT:,})")
    on_overflow: OnOverflow = Field(
        default="queue",
        description="when `limit` jobs of the key already run: `queue` (the job waits for a slot, holding no "
                    "worker); `cancel_newest` (the create is refused, 409 `concurrency-limit-reached`, nothing "
                    "written); `cancel_oldest_queued` (the oldest job of the key waiting for a slot is cancelled, "
                    "and the new one queued)")


@dataclass(frozen=True)
class KeyCount:
    """What a concurrency key's item counts: its jobs running, and its jobs held aside waiting for a slot."""

    running: int = 0
    held: int = 0


def hold_key(key: str) -> str:
    """The hold key (onward.store.held_jobs) of the jobs waiting for a slot of a concurrency key."""
    return f"{HOLD_PREFIX}{key}"


def key_of_hold(hold: str | None) -> str | None:
    """The concurrency key a hold key names, None for any other hold (a pause's) or none."""
    return hold.removeprefix(HOLD_PREFIX) if hold is not None and hold.startswith(HOLD_PREFIX) else None


def limited_sentence(key: str, count: KeyCount, limit: int) -> str:
    """`explain`'s sentence for a job held on its key."""
    return (f"{count.running} of {limit} running for concurrency key {key!r}: it waits, holding no worker, "
            "until an attempt of the key ends")
