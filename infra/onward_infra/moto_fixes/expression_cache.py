"""The one cache of the endpoint's fixes to moto: what they keep per expression (parsed trees and their
pickles, update shapes, the names an expression uses), at most MAX_KEPT entries, the oldest dropped first.

A dict, so that a hit costs what a dict lookup costs (`get`, `in`, `[]` are dict's own); `keep` is the only
way in, and the one eviction rule.
"""

from __future__ import annotations

import threading
from typing import TypeVar

MAX_KEPT = 2048  # entries per cache (a few dozen expressions in practice)

K = TypeVar("K")
V = TypeVar("V")


class ExpressionCache(dict[K, V]):
    """A dict of at most `bound` entries: keeping a new key when it is full drops the oldest kept."""

    def __init__(self, bound: int = MAX_KEPT) -> None:
        if bound < 1:
            raise ValueError(f"a cache keeps at least one entry, not {bound}")
        super().__init__()
        self.bound = bound
        self._keeping = threading.Lock()  # the endpoint serves requests in threads: one eviction at a time

    def keep(self, key: K, value: V) -> V:
        """Keep `value` for `key` (replacing what was kept for it) and return it."""
        with self._keeping:
            if key not in self and len(self) >= self.bound:
                self.pop(next(iter(self)), None)
            self[key] = value
        return value
