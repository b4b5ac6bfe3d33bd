"""`onward tenant`'s checks and formatting (onward/cli/tenants.py), without AWS: a bad value is refused before the
command reads or writes anything, and the listing says what the operator needs (tests/e2e/test_cli_tenants.py
runs the commands against a stack)."""

from __future__ import annotations

import pytest

from onward.cli.main import main
from onward.cli.tenants import listing, listing_text, tenant_change
from onward.domain.dispatch import TenantPolicy, Usage
from onward.domain.errors import InvalidRequest
from onward.operator.claim_history import ClaimCounts
from onward.store.ports import QueueEntry, Tenant, TenantState

MINUTE_MS = 60_000
UNTIL = 1_800_000_060_000


def counts(by_tenant: dict[str, int], *, complete: bool = True, examined: int = 10) -> ClaimCounts:
    return ClaimCounts(UNTIL - MINUTE_MS, UNTIL, MINUTE_MS, {t: [n] for t, n in by_tenant.items()}, examined,
                       complete)


def state(tenant: Tenant, running: int = 0, waiting: int = 0) -> TenantState:
    return TenantState(tenant, Usage(running=running), {0: QueueEntry(tenant.tenant_id, 0, {0: waiting})})


def test_a_change_replaces_only_the_settings_given():
    """Catches a change that resets the settings it was not given, or that ignores --no-cap."""
    registered = Tenant("acme", TenantPolicy(2.0, 5), 4)
    assert tenant_change("acme", weight=3.0).applied_to(registered) == Tenant("acme", TenantPolicy(3.0, 5), 4)
    assert tenant_change("acme", remove_cap=True).applied_to(registered) == Tenant("acme", TenantPolicy(2.0), 4)
    assert tenant_change("acme", cap=7).applied_to(registered) == Tenant("acme", TenantPolicy(2.0, 7), 4)
    assert tenant_change("acme", ready_shards=1).applied_to(None) == Tenant("acme", TenantPolicy(1.0, None), 1)


@pytest.mark.parametrize(("given", "reason"), [
    ({"weight": 0.0}, "--weight: a tenant's weight must be a number from 0.001 to 1000, not 0.0"),
    ({"weight": float("nan")}, "--weight: a tenant's weight must be a number from 0.001 to 1000, not nan"),
    ({"weight": float("-inf")}, "--weight: a tenant's weight must be a number from 0.001 to 1000, not -inf"),
    ({"weight": 1e300}, "--weight: a tenant's weight must be a number from 0.001 to 1000, not 1e+300"),
    ({"weight": 1e-300}, "--weight: a tenant's weight must be a number from 0.001 to 1000, not 1e-300"),
    ({"cap": 0}, "--cap: a tenant's cap must be a whole number >= 1"),
    ({"cap": 3, "remove_cap": True}, "--cap and --no-cap contradict each other"),
    ({"ready_shards": 65}, "--ready-shards: ready shards must be a whole number from 1 to 64, not 65"),
    ({"ready_shards": 0}, "--ready-shards: ready shards must be a whole number from 1 to 64, not 0"),
])
def test_a_value_that_cannot_work_is_refused_naming_the_flag(given, reason):
    """Catches a bad value let through to the registry, and a refusal that does not name the flag."""
    with pytest.raises(InvalidRequest) as refused:
        tenant_change("acme", **given)
    assert str(refused.value).startswith(reason)


def test_the_command_refuses_before_it_needs_a_stack(capsys, monkeypatch):
    """Catches a check made only after the store is reached: with no stack at all, the refusal still comes
    first (exit status 2, `onward tenant: <reason>`)."""
    monkeypatch.delenv("JOBS_TABLE", raising=False)
    assert main(["tenant", "set", "Bad Tenant", "--weight", "2"]) == 2
    assert capsys.readouterr().err == "onward tenant: invalid tenant id 'Bad Tenant'\n"


def test_the_listing_shows_each_tenant_and_shares_that_add_up():
    """Catches shares over the wrong total, a cap of none or a minute without claims shown as a number, and
    rows out of order."""
    states = {"globex": state(Tenant("globex"), running=1), "acme": state(Tenant("acme", TenantPolicy(2.5, 5), 4),
                                                                          running=2, waiting=3),
              "initech": state(Tenant("initech"), waiting=1)}
    report = listing(states, counts({"acme": 3, "globex": 1}))
    assert [(r["tenant_id"], r["claims"], r["claim_share"]) for r in report["tenants"]] == [
        ("acme", 3, 0.75), ("globex", 1, 0.25), ("initech", 0, 0.0)]
    assert report["window"] == {"since": "2027-01-15T08:00:00.000Z", "until": "2027-01-15T08:01:00.000Z",
                                "seconds": 60, "claims": 4, "examined": 10, "complete": True}
    lines = listing_text(report).splitlines()
    assert lines[0].split() == ["tenant", "weight", "cap", "ready", "shards", "running", "waiting", "claims", "share"]
    assert [line.split() for line in lines[1:4]] == [["acme", "2.5", "5", "4", "2", "3", "3", "75.0%"],
                                                     ["globex", "1", "-", "1", "1", "0", "1", "25.0%"],
                                                     ["initech", "1", "-", "1", "0", "1", "0", "0.0%"]]
    assert "a complete count" in lines[4]
    quiet = listing(states, counts({}))
    assert {row["claim_share"] for row in quiet["tenants"]} == {None}
    assert listing_text(quiet).splitlines()[1].split()[-1] == "-"


def test_the_footer_says_when_the_minute_was_not_read_whole():
    """Catches an incomplete count (more outbox entries than one read takes) presented as the minute's."""
    report = listing({"acme": state(Tenant("acme"))}, counts({"acme": 7}, complete=False, examined=20_000))
    assert report["window"]["complete"] is False
    assert "INCOMPLETE count, 7 in the first 20000 outbox entries" in listing_text(report)
    assert listing_text(listing({}, counts({}))).splitlines()[1] == "(no tenant registered)"
