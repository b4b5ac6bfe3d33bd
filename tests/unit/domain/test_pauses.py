"""What a pause covers (onward.domain.pauses): a tenant alone, a type for every tenant, or one tenant's type, and
the drain switch over all of them."""

from __future__ import annotations

import pytest

from onward.domain.pauses import ANY, FlowSwitches, Pause


def test_each_kind_of_pause_covers_exactly_its_jobs() -> None:
    """Catches a type pause that spills over to other tenants' or types' jobs, or a tenant pause that misses one
    of its types."""
    switches = FlowSwitches(frozenset({Pause("acme"), Pause(job_type="demo.mail"), Pause("globex", "demo.echo")}))
    assert not switches.may_start("acme", "demo.echo")  # the whole tenant
    assert not switches.may_start("initech", "demo.mail")  # the type, every tenant
    assert not switches.may_start("globex", "demo.echo")
    assert switches.may_start("globex", "demo.sms") and switches.may_start("initech", "demo.echo")
    assert switches.tenant_paused("acme") and not switches.tenant_paused("globex")
    assert switches.paused_by("acme", "demo.mail") == Pause("acme")  # the tenant's own pause first
    assert switches.of_tenant("globex") == [Pause(None, "demo.mail"), Pause("globex", "demo.echo")]


def test_the_drain_switch_stops_every_start() -> None:
    """Catches a drain that only the paused see."""
    assert not FlowSwitches(draining=True).may_start("acme", "demo.echo")
    assert FlowSwitches().may_start("acme", "demo.echo")


def test_a_pause_names_something_valid_and_round_trips_through_its_keyed_sides() -> None:
    """Catches a pause of nothing, a tenant id or type that would break the store's key (`#`, `*`), and a side
    read back as the wrong one."""
    with pytest.raises(ValueError, match="names a tenant"):
        Pause()
    with pytest.raises(ValueError, match="tenant id"):
        Pause("ac#me")
    with pytest.raises(ValueError, match="job type"):
        Pause(job_type=ANY)
    for pause in (Pause("acme"), Pause(job_type="demo.mail"), Pause("acme", "demo.mail")):
        assert Pause.of_sides(*pause.sides) == pause
