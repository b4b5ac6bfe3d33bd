"""DynamoDB's billing arithmetic for writes (pure): item sizes by DynamoDB's rules and the write units a
write costs. Used by the metering of the embedded endpoint (infra/metering.py) so that bench/e2e.py prints
what a job would cost on AWS.

Item size (DynamoDB developer guide, "Item sizes"): attribute names and values count in UTF-8 bytes; a
number takes about one byte per two significant digits plus one; binary its bytes; null and boolean one
byte; a list or map three bytes plus one per element on top of its elements (a map's keys count too);
a set the sum of its elements.

Write units: a standard write costs one unit per started KB of the larger of the item before and after;
a transactional write two. Each global secondary index the write touches costs standard writes of the
projected item: one to add or remove an index entry, one to rewrite it when projected attributes change,
and two (a delete and a put) when the index key itself changes.
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


@dataclass(frozen=True)
class IndexSpec:
    """What billing needs of a global secondary index."""

    name: str
    key_attributes: tuple[str, ...]  # the index's own keys
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


@dataclass(frozen=True)
class WriteCost:
    table_units: int
    index_units: int

    @property
    def total(self) -> int:
        return self.table_units + self.index_units


def write_cost(before: Item | None, after: Item | None, indexes: Sequence[IndexSpec], *,
               transactional: bool) -> WriteCost:
    """The units of one applied write that turned `before` into `after` (None: no item)."""
    table = units(max(item_size(before), item_size(after))) * (2 if transactional else 1)
    index = 0
    for spec in indexes:
        old, new = spec.project(before), spec.project(after)
        if old is None and new is None:
            continue
        if old is None or new is None:
            index += units(item_size(old or new))
        elif any(old.get(key) != new.get(key) for key in spec.key_attributes):
            index += units(item_size(old)) + units(item_size(new))
        elif old != new:
            index += units(max(item_size(old), item_size(new)))
    return WriteCost(table, index)
