"""A worker's lease renewal (onward/runtime/worker.py LeaseRenewal) starts its threads only when the first renewal is
due, or when the lease would expire sooner: most attempts end before and start none."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

from onward.domain.clock import system_clock
from onward.runtime.execution import JobContext
from onward.runtime.worker import LeaseRenewal
from onward.store.ports import RenewalAnswer


class RenewingStore:
    def __init__(self, hang: threading.Event | None = None) -> None:
        self.renewals = 0
        self._hang = hang  # set: a renewal call hangs until it is released (as botocore's retries can)

    def renew_lease(self, lease: Any, lease_s: float) -> RenewalAnswer:
        self.renewals += 1
        if self._hang is not None:
            self._hang.wait(30)
        return RenewalAnswer(held=True, cancel_requested=False, lease_expires_at=system_clock() + int(lease_s * 1000))


def _renewal(store: RenewingStore, *, expires_in_s: float, every_s: float, lease_s: float = 30.0) -> LeaseRenewal:
    lease = SimpleNamespace(job_id="j", attempt=1, worker_id="w", fencing_token="j#1",
                            lease_expires_at=system_clock() + int(expires_in_s * 1000))
    context = JobContext(job_id="j", tenant_id="t", type="x", params={}, attempt=1, fencing_token="j#1")
    return LeaseRenewal(store, lease, context, lease_s=lease_s, every_s=every_s,  # type: ignore[arg-type]
                        clock=system_clock)


def test_attempts_that_end_before_their_first_renewal_start_no_thread() -> None:
    """Many short attempts: no renewal, no thread of their own. A mutant starting the renewal and watch
    threads at once (as before) would start two per attempt."""
    store = RenewingStore()
    before = threading.active_count()
    renewals = [_renewal(store, expires_in_s=30, every_s=10) for _ in range(50)]
    for renewal in renewals:
        renewal.start()
        renewal.stop()
    assert store.renewals == 0
    assert all(not renewal._threads for renewal in renewals)
    assert threading.active_count() <= before + 1  # at most the process's one deferred-start thread


def test_an_attempt_still_running_at_its_first_renewal_is_renewed_from_then_on() -> None:
    """Renewals start when the first is due and go on every `every_s`. A mutant that never started the
    deferred threads, or started them to wait a whole interval more, would renew less."""
    store = RenewingStore()
    renewal = _renewal(store, expires_in_s=3, every_s=0.1, lease_s=3)
    renewal.start()
    deadline = time.monotonic() + 10
    while store.renewals < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    renewal.stop()
    assert store.renewals >= 3
    assert not any(thread.is_alive() for thread in renewal._threads)


def test_a_lease_expiring_before_the_first_renewal_is_watched_from_its_expiry() -> None:
    """A lease that expires before the first renewal is due (granted late), whose renewal then hangs: the
    handler is told at its expiry, not a whole renewal interval later. A mutant deferring the threads to
    `every_s` (60 s here) would leave the handler working on a job the reaper may hand to another worker."""
    release = threading.Event()
    renewal = _renewal(RenewingStore(hang=release), expires_in_s=0.3, every_s=60)
    context = renewal._context
    renewal.start()
    try:
        assert context.lease_lost.wait(20), "the lease expired without the handler being told"
    finally:
        release.set()
        renewal.stop()


def test_a_start_due_sooner_than_those_waiting_wakes_the_starting_thread_and_a_later_one_need_not() -> None:
    """The starting thread waits for the earliest start it holds; an attempt added behind it (the usual case:
    one lease length for all) does not wake it, one due sooner does. A mutant notifying never would start
    the sooner one only at the later one's time; one notifying always costs a wake-up per attempt."""
    from onward.runtime.worker import _DeferredStarts

    started: dict[str, float] = {}

    class Recorded:
        def __init__(self, name: str) -> None:
            self.name = name

        def start_now(self) -> None:
            started[self.name] = time.monotonic()

    starts = _DeferredStarts()
    woken = 0
    notify = starts._changed.notify

    def counted(n: int = 1) -> None:
        nonlocal woken
        woken += 1
        notify(n)

    starts._changed.notify = counted  # type: ignore[method-assign]
    now = time.monotonic()
    starts.at(now + 3.0, Recorded("later"))  # type: ignore[arg-type]
    starts.at(now + 4.0, Recorded("latest"))  # type: ignore[arg-type]
    starts.at(now + 0.05, Recorded("sooner"))  # type: ignore[arg-type]
    deadline = time.monotonic() + 2.0
    while "sooner" not in started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "sooner" in started and started["sooner"] - now < 1.0
    assert "later" not in started
    assert woken == 2  # the first (the thread's first head) and the sooner one; not the latest
