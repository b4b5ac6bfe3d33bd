"""DynamoDB's billing arithmetic (pure): item sizes by DynamoDB's rules, the write units a write costs (and
which index entries it writes), the read units a read costs. Used by the metering of the embedded endpoint
(infra/onward_infra/metering.py) so that bench/e2e.py prints what a job would cost on AWS.

Item size (DynamoDB developer guide, "Item sizes"): attribute names and values count in UTF-8 bytes; a
number takes about one byte per two significant digits plus one; binary its bytes; null and boolean one
byte; a list or map three bytes plus one per element on top of its elements (a map's keys count too);
a set the sum of its elements.

Write units: a standard write costs one unit per started KB of the larger of the item before and after;
a transactional write two. Each global secondary index the write touches costs standard writes of the
projected item: one to add or remove an index entry, one to rewrite it when projected attributes change,
and two (a delete and a put) when the index key itself changes.

Read units: one per started 4 KB read in one go (an item; for Query and Scan, the items a page examined,
added up before rounding), at least one; half that for an eventually consistent read, twice that for a
transactional one.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Item = dict[str, dict[str, Any]]
KB = 1024
READ_BLOCK = 4 * KB


def _number_size(text: str) -> int:
    digits = re.sub(r"[^0-9]", "", text.split("e", maxsplit=1)[0].split("E", maxsplit=1)[0]).strip("0") or "0"
    return math.ceil(len(digits) / 2) + 1


def value_size(value: dict[str, Any]) -> int:
    """Bytes of one attribute value in DynamoDB JSON ({"S": ...}, {"N": ...}, {"M": {...}}, ...)."""
    (kind, inner), = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        return _number_size(inner)
    if kind == "B":
        return len(inner if isinstance(inner, bytes) else base64.b64decode(inner))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in inner)
    if kind == "NS":
        return sum(_number_size(n) for n in inner)
    if kind == "BS":
        return sum(len(b if isinstance(b, bytes) else base64.b64decode(b)) for b in inner)
    if kind == "L":
        return 3 + sum(1 + value_size(element) for element in inner)
    if kind == "M":
        return 3 + sum(1 + len(name.encode()) + value_size(element) for name, element in inner.items())
    raise ValueError(f"unknown DynamoDB type {kind!r}")


def item_size(item: Item | None) -> int:
    """Bytes of a whole item (0 for no item)."""
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def units(size: int) -> int:
    """Write units of one standard write of an item of `size` bytes (at least one)."""
    return max(1, math.ceil(size / KB))


def read_units(size: int, *, consistent: bool, transactional: bool = False) -> float:
    """Read units of reading `size` bytes in one go: an item (0 when absent), or the items a Query or Scan
    page examined, sizes added up. `transactional` (TransactGetItems) overrides `consistent`."""
    blocks = max(1, math.ceil(size / READ_BLOCK))
    return blocks * (2.0 if transactional else 1.0 if consistent else 0.5)


@dataclass(frozen=True)
class IndexSpec:
    """What billing needs of a global secondary index."""

    name: str
    key_attributes: tuple[str, ...]  # the index's own keys, its partition key first
    table_keys: tuple[str, ...]
    projection: str  # KEYS_ONLY | INCLUDE | ALL
    included: tuple[str, ...] = ()

    def project(self, item: Item | None) -> Item | None:
        """The index entry of `item`, or None when the item is not in this (sparse) index."""
        if not item or any(key not in item for key in self.key_attributes):
            return None
        if self.projection == "ALL":
            return item
        kept = set(self.key_attributes) | set(self.table_keys) | set(self.included)
        return {name: value for name, value in item.items() if name in kept}

    @property
    def partition_key(self) -> str:
        """The attribute whose value names an entry's index partition."""
        return self.key_attributes[0]


@dataclass(frozen=True)
class WriteCost:
    table_units: int
    index_units: int

    @property
    def total(self) -> int:
        return self.table_units + self.index_units


@dataclass(frozen=True)
class IndexWrite:
    """Units a write costs one global secondary index, and the index entry they add, rewrite or remove: its
    value of the index's partition key names the index partition that pays."""

    entry: Item
    units: int


def table_write_units(before: Item | None, after: Item | None, *, transactional: bool) -> int:
    """The table's units of one applied write that turned `before` into `after` (None: no item)."""
    return units(max(item_size(before), item_size(after))) * (2 if transactional else 1)


def index_writes(before: Item | None, after: Item | None, spec: IndexSpec) -> list[IndexWrite]:
    """What one applied write costs the index `spec`: nothing when neither its entry's keys nor its projected
    attributes change; the removed entry then the added one when its index key changes."""
    old, new = spec.project(before), spec.project(after)
    if old is None:
        return [] if new is None else [IndexWrite(new, units(item_size(new)))]
    if new is None:
        return [IndexWrite(old, units(item_size(old)))]
    if any(old.get(key) != new.get(key) for key in spec.key_attributes):
        return [IndexWrite(old, units(item_size(old))), IndexWrite(new, units(item_size(new)))]
    if old != new:
        return [IndexWrite(new, units(max(item_size(old), item_size(new))))]
    return []


def write_cost(before: Item | None, after: Item | None, indexes: Sequence[IndexSpec], *,
               transactional: bool) -> WriteCost:
    """The units of one applied write that turned `before` into `after` (None: no item)."""
    index = sum(write.units for spec in indexes for write in index_writes(before, after, spec))
    return WriteCost(table_write_units(before, after, transactional=transactional), index)
