"""Which tenant's queue a worker looks at first (pure).

For now a rotation over the registered tenants, so no tenant is always last; weighted fair share and
caps that flex (the fairness issue) replace `dispatch_order` without touching the claim path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar


@dataclass(frozen=True)
class TenantPolicy:
    weight: float = 1.0
    cap: int | None = None  # most jobs running at once; None: no cap


class HasTenantId(Protocol):
    tenant_id: str


T = TypeVar("T", bound=HasTenantId)


def dispatch_order(tenants: Sequence[T], rotation: int) -> list[T]:
    """The tenants starting at position `rotation` (mod their number), wrapping around."""
    if not tenants:
        return []
    start = rotation % len(tenants)
    return [*tenants[start:], *tenants[:start]]
