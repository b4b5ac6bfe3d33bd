"""An idle worker backs off: without it a pool waiting for work would claim (one Query each, billed) once per
worker every idle_s, and on the embedded endpoint starve the relay and projector of requests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from onward.runtime.worker import Registry, Worker


class _RecordedWaits:
    """Stands in for the worker's stop event: records each idle wait; stops the loop after `limit` waits."""

    def __init__(self, limit: int) -> None:
        self.waits: list[float] = []
        self._limit = limit

    def is_set(self) -> bool:
        return len(self.waits) >= self._limit

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        return self.is_set()

    def set(self) -> None:
        self._limit = 0


def _worker(outcomes: list[bool], limit: int) -> tuple[Worker, _RecordedWaits]:
    worker = Worker(store=Any, registry=Registry(), idle_s=0.1, idle_max_s=0.8)  # type: ignore[arg-type]  # never read
    script: Iterator[bool] = iter(outcomes)
    worker.run_once = lambda **_: next(script, False)  # type: ignore[method-assign]  # scripted passes
    waits = _RecordedWaits(limit)
    worker._stopping = waits  # type: ignore[assignment]  # an Event stand-in that records the waits
    return worker, waits


def test_empty_claims_wait_longer_and_longer_up_to_the_cap() -> None:
    worker, waits = _worker([], limit=7)
    worker.run()
    ceilings = [0.1, 0.2, 0.4, 0.8, 0.8, 0.8, 0.8]
    assert len(waits.waits) == len(ceilings)
    for wait, ceiling in zip(waits.waits, ceilings, strict=True):
        assert ceiling / 2 <= wait <= ceiling  # jittered, so idle workers do not poll in step


def test_finding_work_resets_the_wait_to_the_shortest() -> None:
    worker, waits = _worker([False, False, False, True, True, False], limit=4)
    worker.run()
    assert waits.waits[2] > 0.2  # third empty claim in a row: ceiling 0.4
    assert waits.waits[3] <= 0.1  # work was found in between: back to idle_s
