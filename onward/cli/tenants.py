"""`onward tenant set` / `onward tenant list`: an operator's change to a tenant's dispatch settings, checked
before anything is read or written, and the tenants' loads as one JSON-ready object and as text. Pure: the
commands in onward/cli/main.py do the reads and the write."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from onward.domain.clock import iso
from onward.domain.dispatch import TenantPolicy
from onward.domain.errors import InvalidRequest
from onward.operator.claim_history import ClaimCounts
from onward.store.ports import Tenant, TenantState
from onward.store.tenants import check_tenant, check_tenant_id

CLAIM_WINDOW_S = 60  # `tenant list` counts the claims of the last minute, in one bucket


@dataclass(frozen=True)
class TenantChange:
    """The settings an operator gives for one tenant; None (and remove_cap False) keeps the registered one.
    Build it with `tenant_change`, which refuses a value that cannot work."""

    tenant_id: str
    weight: float | None = None
    cap: int | None = None
    remove_cap: bool = False
    ready_shards: int | None = None

    def applied_to(self, current: Tenant | None) -> Tenant:
        """The tenant's settings after the change: `current` (None: not registered, so the defaults) with
        the given settings replaced."""
        before = current or Tenant(self.tenant_id)
        cap = None if self.remove_cap else self.cap if self.cap is not None else before.policy.cap
        weight = before.policy.weight if self.weight is None else self.weight
        shards = before.ready_shards if self.ready_shards is None else self.ready_shards
        return Tenant(self.tenant_id, TenantPolicy(weight, cap), shards)


def tenant_change(tenant_id: str, weight: float | None = None, cap: int | None = None, *,
                  remove_cap: bool = False, ready_shards: int | None = None) -> TenantChange:
    """The change, each given value checked by the rules the registry applies (onward.domain.dispatch.TenantPolicy,
    onward.store.tenants.check_tenant). InvalidRequest, naming the flag, for the first that cannot work."""
    check_tenant_id(tenant_id)
    if remove_cap and cap is not None:
        raise InvalidRequest("--cap and --no-cap contradict each other: give one")
    try:
        if weight is not None:
            TenantPolicy(weight=weight)
    except ValueError as error:
        raise InvalidRequest(f"--weight: {error}") from None
    try:
        if cap is not None:
            TenantPolicy(cap=cap)
    except ValueError as error:
        raise InvalidRequest(f"--cap: {error}") from None
    if ready_shards is not None:
        try:
            check_tenant(Tenant(tenant_id, ready_shards=ready_shards))
        except InvalidRequest as error:
            raise InvalidRequest(f"--ready-shards: {error}") from None
    return TenantChange(tenant_id, weight, cap, remove_cap, ready_shards)


def settings_text(tenant: Tenant) -> str:
    """`weight 2, cap 5, ready shards 4` (`no cap` for none)."""
    cap = "no cap" if tenant.policy.cap is None else f"cap {tenant.policy.cap}"
    return f"weight {tenant.policy.weight:g}, {cap}, ready shards {tenant.ready_shards}"


def change_text(before: Tenant | None, after: Tenant) -> str:
    """What `tenant set` prints: the settings before (or that it was not registered) and after."""
    was = "not registered (the defaults: " + settings_text(Tenant(after.tenant_id)) + ")" if before is None \
        else settings_text(before)
    same = " (unchanged)" if before == after else ""
    return f"tenant {after.tenant_id}\n  before: {was}\n  after:  {settings_text(after)}{same}"


def listing(states: Mapping[str, TenantState], claims: ClaimCounts) -> dict[str, Any]:
    """`{"tenants": [...], "window": {...}}`: each registered tenant's settings, running and waiting jobs
    (its counters, exact), its claims in the window and its share of the registered tenants' claims (0 to 1;
    None when the window holds no claim at all, as /ops/tenants answers); the window's bounds, its total, and
    whether every claim of it was read."""
    total = sum(claims.total(tenant) for tenant in states)
    rows = [{"tenant_id": tenant, "weight": state.tenant.policy.weight, "cap": state.tenant.policy.cap,
             "ready_shards": state.tenant.ready_shards, "running": state.usage.running,
             "waiting": state.load().waiting, "claims": claims.total(tenant),
             "claim_share": round(claims.total(tenant) / total, 4) if total else None}
            for tenant, state in sorted(states.items())]
    window = {"since": iso(claims.since_ms), "until": iso(claims.until_ms),
              "seconds": (claims.until_ms - claims.since_ms) // 1000, "claims": total,
              "examined": claims.examined, "complete": claims.complete}
    return {"tenants": rows, "window": window}


COLUMNS = ("tenant", "weight", "cap", "ready shards", "running", "waiting", "claims", "share")


def listing_text(report: Mapping[str, Any]) -> str:
    """`listing` as a table, one row per tenant (cap `-` for none; share in percent, `-` when the window holds
    no claim), and a footer
    saying which minute the claims are of and whether that count is complete."""
    rows = [(row["tenant_id"], f"{row['weight']:g}", "-" if row["cap"] is None else str(row["cap"]),
             str(row["ready_shards"]), str(row["running"]), str(row["waiting"]), str(row["claims"]),
             "-" if row["claim_share"] is None else f"{row['claim_share']:.1%}") for row in report["tenants"]]
    widths = [max(len(cell) for cell in column) for column in zip(COLUMNS, *rows, strict=True)]
    lines = ["  ".join(cell.ljust(width) if i == 0 else cell.rjust(width)
                       for i, (cell, width) in enumerate(zip(line, widths, strict=True))).rstrip()
             for line in (COLUMNS, *rows)]
    if not rows:
        lines.append("(no tenant registered)")
    return "\n".join([*lines, _window_text(report["window"])])


def _window_text(window: Mapping[str, Any]) -> str:
    span = f"{window['since']} to {window['until']}"
    if window["complete"]:
        return (f"claims: {window['claims']} in the last {window['seconds']} s ({span}), a complete count "
                f"({window['examined']} outbox entries read); shares are of claims, not of worker time")
    return (f"claims: INCOMPLETE count, {window['claims']} in the first {window['examined']} outbox entries of "
            f"the last {window['seconds']} s ({span}): the counts are a lower bound, the shares approximate")
