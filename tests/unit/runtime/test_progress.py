"""A running handler's progress in the worker (onward/runtime/progress.py): the rate limit (the first report at
once, the latest after the interval, the last before a quiet period still written), the attempt's sequence
numbers and version, the end of reporting once the attempt lost the job, and reports crossing from a handler's
child process to the worker (onward/runtime/execution.py)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from onward.domain import lifecycle
from onward.domain.models import Lease, NewJob
from onward.runtime.execution import HandlerProcess, JobContext, Returned
from onward.runtime.progress import ProgressReporter
from onward.store.progress import ProgressAnswer
from tests.unit.runtime.test_worker_execution import Handlers, context

INTERVAL_S = 0.3


def lease() -> Lease:
    job = lifecycle.create("a" * 32, "acme", NewJob(type="demo.progress"), 1_800_000_000_000).after
    return Lease(job=job.model_copy(update={"state": "running", "attempt": 1, "version": 2}), worker_id="w1",
                 lease_expires_at=1_800_000_060_000)


class Store:
    """report_progress recorded; `held` False (once `lose_after` writes were made) says the attempt lost it."""

    def __init__(self, *, lose_after: int | None = None, version: int = 2, fail_first: int = 0) -> None:
        self.writes: list[dict[str, Any]] = []
        self.lose_after = lose_after
        self.version = version
        self.fail_first = fail_first
        self.wrote = threading.Event()

    def report_progress(self, lease: Lease, *, version: int, seq: int, fraction: float,
                        message: str | None) -> ProgressAnswer:
        if self.fail_first:
            self.fail_first -= 1
            raise ConnectionError("throttled")
        held = self.lose_after is None or len(self.writes) < self.lose_after
        if held:
            self.writes.append({"version": version, "seq": seq, "fraction": fraction, "message": message})
        self.wrote.set()
        return ProgressAnswer(held=held, written=held, version=self.version)


def wait_for(condition: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_burst_writes_the_first_at_once_and_the_last_once_the_interval_passed():
    """Without the trailing write the last report before a quiet period (here "step 20") would never be
    written; without the limit every report would be a transaction."""
    store = Store()
    reporter = ProgressReporter(store, lease(), interval_s=INTERVAL_S)
    reporter.report(0.05, "step 1")
    wait_for(lambda: len(store.writes) == 1)
    for step in range(2, 21):  # a burst, well within the interval
        reporter.report(step / 20, f"step {step}")
    wait_for(lambda: len(store.writes) == 2)
    time.sleep(INTERVAL_S * 2)  # quiet: nothing more to write
    reporter.close()

    assert [(w["seq"], w["message"]) for w in store.writes] == [(1, "step 1"), (2, "step 20")]
    assert reporter.written == 2


def test_the_version_the_store_answers_is_kept_and_a_failed_write_is_tried_again_with_a_new_seq():
    """A cancel request moves the job's version: without keeping the answered one every later write would be
    refused first. A failed write (throttled) must not lose the value."""
    store = Store(version=3, fail_first=1)
    reporter = ProgressReporter(store, lease(), interval_s=INTERVAL_S)
    reporter.report(0.1, "a")
    wait_for(lambda: len(store.writes) == 1)
    reporter.report(0.2, "b")
    wait_for(lambda: len(store.writes) == 2)
    reporter.close()

    # the first try (seq 1) failed; "a" went again at the interval, and the version answered is used next
    assert [(w["version"], w["seq"], w["message"]) for w in store.writes] == [(2, 2, "a"), (3, 3, "b")]


def test_once_the_attempt_lost_the_job_nothing_more_is_written():
    """Without it a zombie attempt would keep sending refused transactions every interval."""
    store = Store(lose_after=1)
    reporter = ProgressReporter(store, lease(), interval_s=0.05)
    reporter.report(0.1)
    wait_for(lambda: len(store.writes) == 1)
    store.wrote.clear()
    reporter.report(0.2)
    assert store.wrote.wait(5)  # refused: held=False
    reporter.report(0.3)
    time.sleep(0.3)
    reporter.close()
    assert len(store.writes) == 1


def test_close_drops_what_is_pending_and_waits_for_a_write_under_way():
    """The worker closes the reporter before its report: a progress write racing the attempt's own report
    would conflict with it on DynamoDB."""
    release = threading.Event()

    class SlowStore(Store):
        def report_progress(self, lease: Lease, **update: Any) -> ProgressAnswer:
            release.wait(5)
            return super().report_progress(lease, **update)

    store = SlowStore()
    reporter = ProgressReporter(store, lease(), interval_s=INTERVAL_S)
    reporter.report(0.1, "under way")
    wait_for(lambda: reporter._pending is None)  # taken by the reporter's thread, which waits on the store
    reporter.report(0.2, "pending")
    closing = threading.Thread(target=reporter.close)
    closing.start()
    closing.join(0.2)
    assert closing.is_alive()  # waits for the write under way
    release.set()
    closing.join(5)
    assert [w["message"] for w in store.writes] == ["under way"]


def test_a_fraction_outside_0_to_1_raises_in_the_handler():
    """Without the check in the context, a bad value would fail in the worker's thread, far from its line."""
    with pytest.raises(ValueError, match="from 0 to 1"):
        JobContext("j", "acme", "t", {}, 1, "j:1").progress(1.5)


def report_twice(context: JobContext) -> str:
    context.progress(0.5, "half")
    context.progress(1, "done")
    return "ok"


def test_reports_from_a_handlers_child_process_reach_the_workers_context():
    """The handler runs in a forked child: without the ProgressNote messages on its pipe its reports would
    stay in the child's copy of the context."""
    seen: list[tuple[float, str | None]] = []
    process = HandlerProcess(Handlers(demo_progress=report_twice))
    try:
        attempt = context("demo.progress")
        attempt.progress_sink = lambda fraction, message: seen.append((fraction, message))
        outcome = process.run(attempt, timeout_s=30, stop_grace_s=5)
        assert outcome == Returned("ok")
        wait_for(lambda: len(seen) == 2)
        # a note an attempt leaves behind is not taken for the next attempt's
        later = context("demo.progress")
        later.progress_sink = lambda fraction, message: seen.append((fraction, message))
        assert process.run(later, timeout_s=30, stop_grace_s=5) == Returned("ok")
    finally:
        process.close()
    assert seen == [(0.5, "half"), (1.0, "done")] * 2
