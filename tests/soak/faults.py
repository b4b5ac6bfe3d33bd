"""The soak's fault plan: which named fault points fire, at random and aimed at chosen jobs.

Two kinds of faults:
- aimed (by name, at a job's first attempt): the driver picks jobs for each `Aim` before the run, and the
  hooks act when that job's attempt passes the point (`onward.faults.fault_subject()` names it);
- component faults at random: each pass through a point crashes with the plan's probability, and the first
  passes are forced until each point fired `min_fires` times, so a short run still has every kind.
Jobs with an aimed fault are spared the random ones, so their audit can say exactly what must have happened.
"""

from __future__ import annotations

import random
import re
import threading
from dataclasses import dataclass
from enum import StrEnum


class Aim(StrEnum):
    """What happens to an aimed job's first attempt."""

    CRASH_AFTER_CLAIM = "crash_after_claim"  # the worker dies holding the lease (reaper recovers it)
    CRASH_MID_JOB = "crash_mid_job"  # work done, the worker dies before reporting: heartbeats stop
    ZOMBIE = "zombie"  # heartbeats stop, the worker stalls until its job was reclaimed, then reports
    REAPER_RACE = "reaper_race"  # heartbeats stop; the report and the reaper's transition start together
    CANCEL_RACE = "cancel_race"  # a cancel and the completion start together
    CANCEL_RUNNING = "cancel_running"  # cancelled while its handler runs: seen on the next heartbeat


_JOB_ID = re.compile(r"[0-9a-f]{32}")


def job_of(subject: str | None) -> str | None:
    """The job id a fault point's subject names (a fencing token, `<transition>:<job>`), if it names one."""
    found = _JOB_ID.search(subject or "")
    return None if found is None else found.group(0)


# Random component faults: fault point -> the name it is counted under.
RANDOM_POINTS = {
    "worker.after_claim": "worker.after_claim",
    "worker.before_report": "worker.before_report",
    "store.before_commit": "store.before_commit",
    "store.after_commit": "store.after_commit",
    "store.reap.before_transition": "reaper.crash",
    "relay.before_put_records": "relay.before_put_records",
    "relay.after_put_records": "relay.after_put_records",
    "projector.after_record": "projector.mid_batch",
}


@dataclass(frozen=True)
class FaultRates:
    """Probability that one pass through a point crashes (and how many forced fires each point gets)."""

    worker: float = 0.02
    store: float = 0.01
    reaper: float = 0.05
    relay: float = 0.06
    projector: float = 0.004  # per record: a batch of 100 dies about a third of the time
    min_fires: int = 2

    def of(self, point: str) -> float:
        if point.startswith("worker."):
            return self.worker
        if point.startswith("store.reap"):
            return self.reaper
        if point.startswith("store."):
            return self.store
        if point.startswith("relay."):
            return self.relay
        return self.projector


class RandomFaults:
    """Decides, per pass through a point, whether it crashes: forced until `min_fires`, then at random."""

    def __init__(self, rates: FaultRates, seed: int) -> None:
        self._rates = rates
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._passes: dict[str, int] = {}
        self.fired: dict[str, int] = {}

    def decide(self, point: str) -> bool:
        with self._lock:
            passes = self._passes[point] = self._passes.get(point, 0) + 1
            fired = self.fired.get(RANDOM_POINTS[point], 0)
            # the 3rd, 5th, ... passes are forced until min_fires: a point passed only a few times in a short
            # run (the reaper's, once per expired lease) still fires, yet its first passes go through
            forced = fired < self._rates.min_fires and passes >= 3 + 2 * fired and passes % 2 == 1
            fire = forced or self._rng.random() < self._rates.of(point)
            if fire:
                self.fired[RANDOM_POINTS[point]] = fired + 1
            return fire
