"""Named fault points (onward.faults): a no-op without a hook, the hook sees the point's subject, and a
hook is gone when its block ends (else a drill's crash would leak into the next test or into production)."""

from __future__ import annotations

import pytest

from onward.faults import InjectedCrash, fault_point, fault_subject, injected, installed


def test_without_a_hook_a_fault_point_does_nothing():
    fault_point("nowhere", "job:1")
    assert fault_subject() is None


def test_a_hook_reads_the_subject_of_the_point_it_fires_at_and_only_there():
    seen: list[tuple[str, str | None]] = []
    with installed("worker.before_report", lambda name: seen.append((name, fault_subject()))):
        fault_point("worker.before_report", "abc:2")
        fault_point("worker.before_report")
        fault_point("worker.after_claim", "abc:2")  # another point: no hook
    fault_point("worker.before_report", "abc:3")  # the block ended: no hook
    assert seen == [("worker.before_report", "abc:2"), ("worker.before_report", None)]
    assert fault_subject() is None


def test_injected_crashes_the_first_passes_only_and_the_crash_escapes_except_exception():
    def component_step() -> None:
        try:
            fault_point("relay.before_put_records")
        except Exception:  # noqa: BLE001 - what a component's error handling would do
            pytest.fail("an injected crash must not be swallowed by `except Exception`")

    with injected("relay.before_put_records", times=1) as fired:
        with pytest.raises(InjectedCrash):
            component_step()
        fault_point("relay.before_put_records")  # second pass: no crash
    assert fired == ["relay.before_put_records"]
