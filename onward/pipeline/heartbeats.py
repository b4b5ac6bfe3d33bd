"""Pipeline heartbeats: proof, stream shard by stream shard, that the event path is moving while no job changes.

A status is shown with `view_lag_s`, an upper bound on how far behind the view is (onward.domain.freshness). With no
traffic that bound would grow without end, so on a schedule a heartbeat is committed to the outbox like any
transition and travels the same path. What it may vouch for is limited by the topology:

- The outbox table's stream has one shard per partition of the table, several open at once, and Lambda's
  events do not say which shard a batch came from. An item travels through the shard of its key's partition,
  behind every commit made there before it, and vouches for nothing else. So a heartbeat is a *beat*: one
  item in each of K slots (`job_id = HEARTBEAT#<slot>`), K = SLOTS_PER_SHARD per open stream shard. Each slot's
  key is in one partition; with 16 slots per shard a partition holds no slot with a chance near e^-16.
- K is decided from a listing of the stream's open shards taken for that beat (`plan_beat`), and the beat
  vouches for no commit after that listing (`vouches_until`: when it was taken, less a slack). Shards split
  and merge at any time, so a shard may open between the listing and the beat's commit, narrower than the
  listing counted, and hold no slot; every commit in it comes after its opening, so after the listing, and
  the beat does not vouch for it. A shard the listing counted holds some slot, or its children do (a child
  is read only after its parent is drained), so every commit before the listing in it has been relayed once
  the slot was.
- The relay passes on, after the batch's events, each slot's newest item as its commit time (the stream
  record's ApproximateCreationDateTime), capped at the item's `vouches_until`, to EVERY shard of the events
  stream (`Heartbeat.through`).
- A consumer keeps, per slot, the newest commit time it has passed on (onward.pipeline.checkpoints). Its
  watermark is the OLDEST slot's: every commit before it, in every partition, has passed that consumer. A
  relay stuck on one stream shard holds back the slots of that partition, and with them the watermark.

Times are commit times, as DynamoDB stamps them, never the writer's decision time: a transition decided
before a heartbeat but committed after it is not vouched for, and is shown with its own commit time. The one
time of the emitter's clock is its listing's, moved back by the slack (`plan_beat`) so that it is earlier
than any commit stamp DynamoDB gives after the listing. Heartbeat items have no `time_bucket` (replay windows
never see them) and a short TTL. `OutboxReader` skips them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from onward.domain.clock import EpochMs, iso
from onward.store.dynamo.attributes import Item

HEARTBEAT_PARTITION = "HEARTBEAT"
HEARTBEAT_KIND: Final = "heartbeat"
HEARTBEAT_TTL_S = 3600
SLOTS_PER_SHARD = 16
MIN_SLOTS = 16
MAX_SLOTS = 2048
# A beat's slack on AWS (plan_beat): commit stamps are whole seconds rounded down (1 s), Lambda's and
# DynamoDB's clocks are kept within milliseconds of each other, and the rest is for a shard just opened that
# DescribeStream does not list yet.
AWS_BEAT_SLACK_MS = 5_000

SlotId = int


class Heartbeat(BaseModel):
    """One heartbeat as it travels on the events stream (Kinesis): per slot, the commit time through which
    that slot's partition of the outbox has been relayed. A field a newer relay adds is ignored (the rule of
    onward.domain.schema_versions: an additive change is read by the consumers not yet upgraded)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: Literal["heartbeat"] = HEARTBEAT_KIND
    slots: int = Field(default=0, ge=0, le=MAX_SLOTS)  # K of the newest beat relayed in the batch
    through: dict[SlotId, EpochMs] = Field(default_factory=dict)  # slot -> commit time (epoch ms)
    parents: tuple[str, ...] = ()  # on Kinesis: the parent shards of the shard it was put on (after a reshard)
    occurred_at: str | None = None  # the format before slots: still read, vouches for nothing


@dataclass(frozen=True)
class HeartbeatPart:
    """One slot's item of a beat, as the relay reads it from the outbox stream."""

    slot: SlotId
    slots: int
    vouches_until: EpochMs  # the latest commit time the item may vouch for (its beat's listing, less the slack)


@dataclass(frozen=True)
class BeatPlan:
    """What one beat is: K slots, and the latest commit time it may vouch for."""

    slots: int
    vouches_until: EpochMs


def slot_count(open_stream_shards: int) -> int:
    """K for a beat: SLOTS_PER_SHARD slots per open outbox-stream shard, within [MIN_SLOTS, MAX_SLOTS]."""
    return max(MIN_SLOTS, min(MAX_SLOTS, SLOTS_PER_SHARD * open_stream_shards))


def plan_beat(open_stream_shards: int, listed_at: EpochMs, slack_ms: int) -> BeatPlan:
    """The one decision of a beat's shape, from a listing of the outbox stream's open shards that began at
    `listed_at` (the emitter's clock): K by the shards it counted, and a bound `slack_ms` before the listing.
    The slack must cover how coarse DynamoDB's commit stamps are (whole seconds, rounded down, on AWS), how far
    the emitter's clock may run ahead of DynamoDB's, and how long a new shard may be missing from a listing:
    then every commit stamped before the bound was made in a shard the listing counted (or its ancestor)."""
    if slack_ms < 0:
        raise ValueError(f"a beat's slack is at least 0 ms, not {slack_ms}")
    return BeatPlan(slot_count(open_stream_shards), listed_at - slack_ms)


def is_heartbeat_image(image: Item) -> bool:
    """Whether an outbox item (DynamoDB wire format) is a heartbeat rather than a job event."""
    kind: str | None = image.get("kind", {}).get("S")
    return kind == HEARTBEAT_KIND


def heartbeat_part(image: Item) -> HeartbeatPart | None:
    """The slot an outbox heartbeat item fills; None for an item that vouches for nothing: of the format
    before slots, or of a beat with no `vouches_until` (sized from a count of shards of unknown age)."""
    if "slot" not in image or "vouches_until" not in image:
        return None
    slot, slots = int(image["slot"]["N"]), int(image["slots"]["N"])
    if not 0 <= slot < slots <= MAX_SLOTS:
        raise ValueError(f"heartbeat slot {slot} of {slots}")
    return HeartbeatPart(slot, slots, int(image["vouches_until"]["N"]))


def encode_heartbeat(heartbeat: Heartbeat) -> bytes:
    """The record's data: what is set (a stream never resharded sends no `parents`)."""
    return json.dumps({"kind": HEARTBEAT_KIND, **heartbeat.model_dump(mode="json", exclude_defaults=True)},
                      separators=(",", ":")).encode()


def decode_heartbeat(payload: dict[str, Any]) -> Heartbeat | None:
    """The heartbeat a decoded Kinesis record holds, or None when the record is not a heartbeat."""
    if payload.get("kind") != HEARTBEAT_KIND:
        return None
    return Heartbeat.model_validate(payload)


def heartbeat_items(at: EpochMs, plan: BeatPlan) -> list[Item]:
    """The outbox items of one beat: one per slot."""
    return [{
        "job_id": {"S": f"{HEARTBEAT_PARTITION}#{slot}"},
        "version": {"N": str(at)},
        "kind": {"S": HEARTBEAT_KIND},
        "slot": {"N": str(slot)},
        "slots": {"N": str(plan.slots)},
        "vouches_until": {"N": str(plan.vouches_until)},
        "occurred_at": {"S": iso(at)},
        "expires_at": {"N": str(at // 1000 + HEARTBEAT_TTL_S)},
    } for slot in range(plan.slots)]


def merge_through(into: dict[SlotId, EpochMs], more: Mapping[SlotId, EpochMs]) -> None:
    """Keep, per slot, the newest commit time of either."""
    for slot, at in more.items():
        if at > into.get(slot, -1):
            into[slot] = at
