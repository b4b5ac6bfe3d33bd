"""The local fence reconciler's switch (onward_infra.platform.AfterFailover, home_epoch): under `onward up` the
jobs-stream poller starts only once this Region's epoch item names it home at an epoch above 0, as on AWS, where
the mapping is created disabled and `onward failover` enables it in the new home only (issue 39's gaps).

How it breaks: polling from epoch 0 is the idle cost the AWS mapping no longer pays; polling in the old home,
whose table holds the new home's replicated epoch item, would reconcile where the template never enables it."""

from __future__ import annotations

from onward.domain.regions import RegionEpoch
from onward_infra.platform import AfterFailover, home_epoch


def _item(epoch: int, home: str | None) -> RegionEpoch:
    return RegionEpoch(epoch=epoch, home=home, previous_home=None, fenced_at=None, decided_by=None, reason=None)


def test_only_the_region_failed_over_to_counts_as_failed_over() -> None:
    assert home_epoch(RegionEpoch.never_failed_over(), "eu-west-2") == 0
    assert home_epoch(_item(1, "eu-west-2"), "eu-west-2") == 1
    assert home_epoch(_item(1, "eu-west-2"), "eu-west-3") == 0  # the old home, the item replicated into it
    assert home_epoch(_item(1, "eu-west-2"), None) == 0


def test_the_poller_starts_when_the_region_becomes_home_and_stays_on() -> None:
    items = [_item(0, None)]
    now = [0.0]
    ticks: list[int] = []
    switch = AfterFailover(lambda: home_epoch(items[-1], "eu-west-2"), lambda: ticks.append(1) or True,
                           check_every_s=5.0, monotonic=lambda: now[0])
    assert switch() is False and not ticks
    items.append(_item(1, "eu-west-3"))  # a failover elsewhere
    now[0] += 5.0
    assert switch() is False and not switch.enabled
    items.append(_item(2, "eu-west-2"))
    now[0] += 1.0
    assert switch() is False  # (read again only after check_every_s)
    now[0] += 4.0
    assert switch() is True and switch.enabled and ticks == [1]
    items.append(_item(3, "eu-west-3"))  # a later failover away: the mapping stays on until a redeploy
    assert switch() is True and ticks == [1, 1]
