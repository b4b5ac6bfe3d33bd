"""What a JobStore counts about itself: the races its transactions lost, by cause, and the overlapping
attempts its zombies' evidence revealed (the metrics to publish)."""

from __future__ import annotations

import threading


class StoreStats:
    """Transactions the store had to decide again, by cause (TransactionConflict: a concurrent transaction
    on an item; ConditionalCheckFailed: the job row moved since it was read). Throttling and 5xx retries are
    botocore's (standard mode, onward.settings) and show in each response's RetryAttempts, not here."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lost: dict[str, int] = {}
        self._overlaps = 0
        self._overlap_checks_failed = 0

    def lost_race(self, cause: str) -> None:
        with self._lock:
            self._lost[cause] = self._lost.get(cause, 0) + 1

    def lost_races(self) -> dict[str, int]:
        """Cause -> transactions re-decided after losing to it, since this store was built."""
        with self._lock:
            return dict(self._lost)

    def overlap_found(self, pairs: int) -> None:
        with self._lock:
            self._overlaps += pairs

    def overlaps_found(self) -> int:
        """Pairs of attempts of one job found to have run at once (onward.domain.overlaps), each counted once, by the
        store that saw the zombie's evidence, since this store was built: the metric to publish."""
        with self._lock:
            return self._overlaps

    def overlap_check_failed(self) -> None:
        with self._lock:
            self._overlap_checks_failed += 1

    def overlap_checks_failed(self) -> int:
        """Refused lease renewals whose overlap check raised (the refusal was still answered; the zombie's
        late report checks again)."""
        with self._lock:
            return self._overlap_checks_failed
