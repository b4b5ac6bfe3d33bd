"""Which versions of a record's shape a reader understands: the rule that lets writers and readers upgrade in
any order (docs/upgrades.md).

Every event carries `schema` and every job-store item its shape's version as a MAJOR number. The rule:

- An additive change (a new optional field, a new value a reader may ignore) keeps the major. Readers ignore
  fields they do not know, so a writer upgraded before its readers changes nothing for them, and a reader
  upgraded first reads what the old writer wrote (the new field absent: it must have a default).
- A breaking change (a field removed, renamed, retyped, or a meaning changed) bumps the major, and takes two
  deploys: first readers that read both majors (the new one and the one before), then writers of the new one.
- So a reader reads its current major and the previous one, and refuses a newer major: it cannot know what
  changed. A pipeline consumer parks such a record with the reason (NewerSchema's text), and the upgraded
  consumer re-drives it (`onward replay` of its job); a store reader fails the request with the reason.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

EVENT_SCHEMA = 1  # the major of the outbox events (OutboxEvent) this code writes and reads
ITEM_SHAPE = 1  # the major of the job store's items (onward.store.dynamo.keys) this code writes and reads
ITEM_SHAPE_ATTRIBUTE = "shape"  # an item's shape major; an item without it was written before versions: shape 1


class NewerSchema(ValueError):
    """A record of a major newer than this reader knows: refused whole, never read in part."""

    def __init__(self, kind: str, found: int, current: int) -> None:
        super().__init__(f"{kind} of schema {found}, newer than this reader's {current}: a writer was deployed "
                         "before its readers; upgrade this reader, then re-drive it")
        self.found = found
        self.current = current


class UnknownSchema(ValueError):
    """A record whose version is no version at all (not a whole number >= 1), or too old to be read."""


def readable_majors(current: int) -> frozenset[int]:
    """The majors a reader of `current` reads: its own and the one before (none below 1)."""
    return frozenset(major for major in (current - 1, current) if major >= 1)


def check_major(kind: str, found: Any, current: int) -> int:
    """The major `found` if a reader of `current` reads it; NewerSchema for a newer one, UnknownSchema for
    anything else (bool is refused: True is no version)."""
    if isinstance(found, bool) or not isinstance(found, int):
        raise UnknownSchema(f"{kind} with schema {found!r}: not a version (a whole number >= 1)")
    if found > current:
        raise NewerSchema(kind, found, current)
    if found not in readable_majors(current):
        raise UnknownSchema(f"{kind} of schema {found}: this reader reads {sorted(readable_majors(current))}")
    return found


def item_shape(values: Mapping[str, Any], kind: str) -> int:
    """The shape major of a stored item (plain values), checked as check_major does; 1 when it has none."""
    return check_major(kind, values.get(ITEM_SHAPE_ATTRIBUTE, 1), ITEM_SHAPE)


def known_fields(values: Mapping[str, Any], fields: Collection[str]) -> dict[str, Any]:
    """`values` without the names a reader does not know: a field added by a newer writer of the same major
    is ignored, not refused."""
    return {name: value for name, value in values.items() if name in fields}
