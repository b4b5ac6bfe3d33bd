"""How `wait` polls a job without hammering the API, shared by Client and AsyncClient: the delays (from
`start_s`, growing by `factor` to `cap_s`, each with some jitter so that many waiters spread out), conditional
reads (the last status's ETag: a 304 costs the API one read and carries no body), and an unconditional read at
least every `refresh_s`, so the status a wait returns or times out with carries a freshness measured recently
(a 304 says nothing newer was projected; it does not measure how far behind the view is)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from onward.client.models import JobStatus


@dataclass(frozen=True)
class PollPolicy:
    start_s: float = 0.2
    factor: float = 1.5
    cap_s: float = 5.0
    jitter: float = 0.1  # each delay is drawn within +-10% of its step
    refresh_s: float = 30.0
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.start_s <= 0 or self.factor < 1 or self.cap_s < self.start_s or not 0 <= self.jitter < 1:
            raise ValueError("a PollPolicy needs 0 < start_s <= cap_s, factor >= 1 and 0 <= jitter < 1")


class Waiting:
    """One wait's state: its deadline (monotonic), the next delay, and the last status read."""

    def __init__(self, policy: PollPolicy, timeout_s: float) -> None:
        if timeout_s < 0:
            raise ValueError("timeout_s must be >= 0")
        self.policy = policy
        self.deadline = time.monotonic() + timeout_s
        self.step_s = policy.start_s
        self.last: JobStatus | None = None

    def since(self) -> JobStatus | None:
        """The status to read conditionally against: the last one, unless its body is over `refresh_s` old."""
        last = self.last
        if last is None or last.etag is None:
            return None
        received_s = (datetime.now(UTC) - last.received_at).total_seconds()
        return last if received_s < self.policy.refresh_s else None

    def next_delay_s(self) -> float | None:
        """The sleep before the next read, trimmed to the deadline; None: the deadline has passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None
        spread = self.step_s * self.policy.jitter
        delay = self.step_s + self.policy.rng.uniform(-spread, spread)
        self.step_s = min(self.policy.cap_s, self.step_s * self.policy.factor)
        return min(delay, left)
