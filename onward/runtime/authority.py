"""The authority lease (issue 39, docs/regional-recovery.md "How it is fenced", step 4): a process of Region R
claims, renews leases, reports, reaps and fires schedules only while it has confirmed, within
`lease_s`, that the witness record (onward.operator.witness) names R as home.

- The witness is read when a check is due (every `check_s`), by the first caller that needs the answer: the
  worker's claim, a lease renewal, a report, the reaper's or scheduler's pass. No thread of its own; one
  caller reads while the others keep the last answer.
- A witness naming another Region stops the process at once (`standby`). A witness that cannot be read stops
  it `lease_s` after its last confirmation (`unconfirmed`); before the first confirmation it is `unconfirmed`.
- A witness never written names `home_region` (ONWARD_HOME_REGION) at epoch 0: a deployment that never
  failed over.
- A newer epoch in the witness naming this Region is handed to the store (`set_region_epoch`): its writes from
  then on name it. An old home keeps its epoch: whatever it still writes is of the old epoch, which the new home
  reconciles (adopted, restored or marked).
- The process logs once when it stops acting and once when it acts again; `state` is what `GET /health` says.

No witness configured (ONWARD_WITNESS unset): no lease is attached and every process is home (one Region).
A lease is attached to its JobStore (`attach`), so the worker, reaper and scheduler find it through the store
they already hold, and two deployments in one process (tests) never share one.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from aws_lambda_powertools import Logger

from onward.domain.errors import RegionFenced
from onward.domain.models import Lease
from onward.domain.regions import Witness
from onward.operator.witness import (
    InvalidWitness,
    WitnessError,
    WitnessRecord,
    WitnessSpec,
    client_factory,
    witness_record,
)
from onward.settings import AuthoritySettings, InvalidSetting, Settings
from onward.store.ports.outcomes import RenewalAnswer
from onward.store.service import JobStore

logger = Logger(service="onward-authority")

T = TypeVar("T")


class AuthorityState(StrEnum):
    HOME = "home"  # confirmed within the lease that the witness names this Region
    STANDBY = "standby"  # the witness names another Region
    UNCONFIRMED = "unconfirmed"  # not confirmed within the lease (witness unreachable), or never yet


class NotHome(RegionFenced):
    """This process's Region is not (confirmed) home: what it was about to write is not written. A worker
    treats it as the store's RegionFenced, a lost lease: the attempt's report is dropped, never retried."""


class EpochHolder(Protocol):
    def set_region_epoch(self, epoch: int) -> None: ...


class AuthorityLease:
    """Whether `region` is home, from `witness`, by `clock` (monotonic seconds)."""

    def __init__(self, witness: WitnessRecord, region: str, *, lease_s: float, check_s: float,
                 home_region: str | None = None, store: EpochHolder | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._witness = witness
        self.region = region
        self.lease_s = lease_s
        self.check_s = check_s
        self._home_region = home_region
        self._store = store
        self._clock = clock
        self._confirmed_at: float | None = None
        self._checked_at: float | None = None
        self._named: Witness | None = None  # what the witness said last
        self._epoch: int | None = None  # the newest epoch handed to the store
        self._acting: bool | None = None  # what was logged last
        self._reading = threading.Lock()

    @property
    def witness(self) -> Witness | None:
        """What the witness said at its last successful read."""
        return self._named

    @property
    def state(self) -> AuthorityState:
        """What the last checks say now (no read)."""
        if self._named is not None and self._named.home != self.region:
            return AuthorityState.STANDBY
        if self._confirmed_at is not None and self._clock() - self._confirmed_at < self.lease_s:
            return AuthorityState.HOME
        return AuthorityState.UNCONFIRMED

    def is_home(self) -> bool:
        """Whether this process may act now: reads the witness first when a check is due."""
        now = self._clock()
        due = self._checked_at is None or now - self._checked_at >= self.check_s
        # The first answer waits for a read; later ones keep the last answer while another caller reads.
        if due and self._reading.acquire(blocking=self._checked_at is None):
            try:
                if self._checked_at is None or self._clock() - self._checked_at >= self.check_s:
                    self.check()
            finally:
                self._reading.release()
        return self._tell(self.state)

    def check(self) -> AuthorityState:
        """Read the witness now."""
        self._checked_at = self._clock()
        try:
            named = self._witness.read()
        except (WitnessError, InvalidWitness) as error:
            logger.warning("authority: the witness could not be read", extra={
                "region": self.region, "witness": self._witness.where, "error": str(error),
                "confirmed_s_ago": None if self._confirmed_at is None else self._checked_at - self._confirmed_at})
            return self.state
        if named is None:  # never written: the configured home, epoch 0
            named = Witness(home=self._home_region, epoch=0) if self._home_region else None
        self._named = named
        if named is not None and named.home == self.region:
            self._confirmed_at = self._checked_at
        # Only a process of the home named takes its epoch (fix of issue 39's drill): an old home's store writing
        # under the new epoch would stamp what it still writes (a create is refused by nothing; the claims of
        # such rows pass) as the new home's own, which the fence reconciler then cannot tell from them.
        if named is not None and named.home == self.region and named.epoch > (self._epoch or 0):
            self._epoch = named.epoch
            if self._store is not None:
                self._store.set_region_epoch(named.epoch)
        return self.state

    def _tell(self, state: AuthorityState) -> bool:
        acting = state is AuthorityState.HOME
        if acting != self._acting:
            self._acting = acting
            extra = {"region": self.region, "authority": state.value, "witness": self._witness.where,
                     "witness_home": self._named.home if self._named else None,
                     "witness_epoch": self._named.epoch if self._named else None}
            if acting:
                logger.info("authority: this Region is home: acting", extra=extra)
            else:
                logger.warning("authority: this Region is not confirmed home: claims, renewals, reports, "
                               "reaping and schedules stop", extra=extra)
        return acting


_leases: weakref.WeakKeyDictionary[Any, AuthorityLease] = weakref.WeakKeyDictionary()


def attach(store: Any, lease: AuthorityLease) -> None:
    """`lease` decides for the processes that write through `store`."""
    _leases[store] = lease


def lease_of(store: Any) -> AuthorityLease | None:
    return _leases.get(store)


def is_home(store: Any) -> bool:
    """Whether writes through `store` may be made now (True when no lease is attached: one Region)."""
    lease = _leases.get(store)
    return lease is None or lease.is_home()


def state_of(store: Any) -> AuthorityState:
    """What `GET /health` says: home without a lease."""
    lease = _leases.get(store)
    return AuthorityState.HOME if lease is None else lease.state


def require_home(store: Any) -> None:
    """NotHome unless `store`'s process may act now."""
    if not is_home(store):
        raise NotHome("this Region is not confirmed home (the witness names another, or could not be read "
                      "within the authority lease): nothing written")


def when_home(store: Any, write: Callable[..., T]) -> Callable[..., T]:
    """`write`, called only while home (NotHome otherwise): the worker's report."""

    def guarded(*args: Any, **kwargs: Any) -> T:
        require_home(store)
        return write(*args, **kwargs)

    return guarded


def renew_when_home(store: JobStore, lease: Lease, lease_s: float) -> RenewalAnswer:
    """The lease renewal of a running attempt; while not home, no renewal and the attempt's lease counts as
    lost (its handler is asked to stop; its report is then dropped by `when_home`)."""
    if not is_home(store):
        return RenewalAnswer(held=False, cancel_requested=False, lease_expires_at=None)
    try:
        return store.renew_lease(lease, lease_s)
    except RegionFenced:  # the row is of another epoch now: the lease is gone, not a renewal to retry
        return RenewalAnswer(held=False, cancel_requested=False, lease_expires_at=None)


def lease_from_settings(authority: AuthoritySettings, settings: Settings, store: EpochHolder | None
                        ) -> AuthorityLease | None:
    """The lease ONWARD_WITNESS asks for, over this process's Region (AWS_REGION), or None when it names no
    witness. InvalidSetting when it cannot work."""
    if authority.witness is None:
        return None
    try:
        spec = WitnessSpec.parse(authority.witness)
    except InvalidWitness as error:
        raise InvalidSetting(str(error)) from None
    if not settings.region:
        raise InvalidSetting("ONWARD_WITNESS needs AWS_REGION (the Region this process is in)")
    clients = client_factory(authority.witness_endpoint_url or settings.endpoint_url)
    record = witness_record(spec, clients, jobs_table=settings.require("jobs_table") if spec.kind == "table" else None)
    return AuthorityLease(record, settings.region, lease_s=authority.lease_s, check_s=authority.check_s,
                          home_region=authority.home_region, store=store)


def attach_from_environment(store: JobStore, authority: AuthoritySettings, settings: Settings) -> None:
    """With a witness (several Regions): the store writes under the epoch item's epoch from the start (the
    lease keeps it current), and the lease decides whether its processes act. Without one: epoch 0, home."""
    lease = lease_from_settings(authority, settings, store)
    if lease is not None:
        store.set_region_epoch(store.region_epoch().epoch)
        attach(store, lease)


def authority_now(lease: AuthorityLease | None) -> AuthorityState:
    """What `GET /health` says: the lease's state after a check if one is due; home without a lease."""
    if lease is None:
        return AuthorityState.HOME
    lease.is_home()
    return lease.state
