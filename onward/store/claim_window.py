"""The tenants at the head of the `active` index, taken a window at a time, and how far the claim may trust
what it has examined (pure).

Keys in the `active` index are lower bounds of their tenants' virtual times (a key is its tenant's virtual
time when the entry was last served or re-keyed; running attempts and lifts only raise it since). So a
tenant the claim has not examined is at least at its key, and one whose entries were not read at all is at
least at `ActiveHead.unread_from`. A claim that examines tenants in key order may serve the best of those it
examined once that tenant's exact virtual time is at most the least key it has not examined (plus
WINDOW_SLACK_MS): then no tenant anywhere in the index comes before it, however many wait. Otherwise the
tenants it examined were behind their keys (their entries are re-keyed) and it examines the next window.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from onward.domain.dispatch import Candidate
from onward.store.ports.rows import ActiveEntry, ActiveHead

# Virtual ms by which the served tenant may come after a tenant the claim did not examine: the order is
# exact within this (and an examined tenant this far behind its key is re-keyed).
WINDOW_SLACK_MS = 250.0


class HeadWindow:
    """The distinct tenants of a read of the `active` head, in key order, handed out a window at a time."""

    def __init__(self, head: ActiveHead, examined: Collection[str] = ()) -> None:
        self._entries: dict[str, list[ActiveEntry]] = {}
        for entry in head:
            if entry.tenant_id not in examined:
                self._entries.setdefault(entry.tenant_id, []).append(entry)
        self._order = list(self._entries)  # by each tenant's least key (the head is in key order)
        self._next = 0
        self._unread_from = head.unread_from

    def __bool__(self) -> bool:
        return bool(self._order)

    def more(self) -> bool:
        """Whether tenants of the head are left to examine."""
        return self._next < len(self._order)

    def take(self, count: int) -> dict[str, list[ActiveEntry]]:
        """The next `count` tenants not yet examined, with their entries in the head."""
        taken = self._order[self._next:self._next + count]
        self._next += len(taken)
        return {tenant_id: self._entries[tenant_id] for tenant_id in taken}

    def bound(self) -> float:
        """The least virtual time a tenant not yet examined can have: the key of the next one in the head,
        or, past the head, the least key of the entries the read left unread (infinite when none was)."""
        unread = self._unread_from if self._unread_from is not None else float("inf")
        if self.more():
            return min(self._entries[self._order[self._next]][0].active_vt, unread)
        return unread

    def trusts(self, virtual_time: float) -> bool:
        """Whether a tenant examined at `virtual_time` comes before every tenant not examined."""
        return virtual_time <= self.bound() + WINDOW_SLACK_MS

    def read_short(self, virtual_time: float) -> bool:
        """Whether the head read ended before it could trust a tenant examined at `virtual_time`: entries it
        left unread may come first (a read of the head now, after the re-keys, would show them)."""
        return not self.more() and not self.trusts(virtual_time)


def rekeyed(head: ActiveHead, raised: Iterable[tuple[str, int, float]]) -> ActiveHead:
    """`head` with the keys of the entries (tenant, shard, key) raised and in key order again: what a read
    would show after those re-keys (a key is never lowered)."""
    keys = {(tenant_id, shard): key for tenant_id, shard, key in raised}
    entries = [entry._replace(active_vt=max(entry.active_vt, keys.get((entry.tenant_id, entry.shard),
                                                                         entry.active_vt)))
               for entry in head]
    entries.sort(key=lambda entry: (entry.active_vt, entry.tenant_id, entry.shard))
    return ActiveHead(entries, unread_from=head.unread_from)


def served_next(within_cap: Sequence[Candidate], window: HeadWindow) -> str | None:
    """The tenant a claim serves next unless its transaction fails: the best examined below its cap, once no
    tenant not examined can come first. Its examination does not re-key its entries: the claim's transaction
    raises the entry it serves, and a key only ever needs raising to let another tenant show first, which
    none does while this one is the best. Re-keying them anyway moved each of its other entries' index
    entries at every claim (2 write units each): a tenant alone on 8 ready shards paid about 7 of its 43
    write units a job that way."""
    best = within_cap[0] if within_cap else None
    return best.tenant_id if best is not None and window.trusts(best.virtual_time) else None
