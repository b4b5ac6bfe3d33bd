"""`onward overlaps --since T [--json]` against a stack on the embedded endpoint: the jobs whose attempts ran
at once, read from the jobs table's `overlaps` index, and only those."""

from __future__ import annotations

import json

import pytest

from onward.cli.main import main
from onward.domain.clock import iso, system_clock
from onward.domain.models import NewJob
from onward.store.service import JobStore, ReportStatus
from tests.support import ManualClock

ECHO = NewJob(type="demo.echo", params={"n": 1})


def test_overlaps_lists_the_job_whose_zombie_reported_after_its_successor_claimed(
        stack_environment, settings, dynamodb, capsys: pytest.CaptureFixture[str]) -> None:
    """Two jobs reaped an hour ago: one's zombie completes 5 s after attempt 2 was claimed (an overlap), the
    other's reports before its attempt 2 was claimed (none). The command lists the first (text and JSON:
    tenant, type, each attempt's interval and what it overlapped, exit status 1), not the second, and
    nothing for a window that begins after the overlap (exit status 0). Would catch the command listing
    every reaped job, missing the overlap, or reading the index outside the window."""
    clock = ManualClock(system_clock() - 3_600_000)
    store = JobStore(settings, client=dynamodb, clock=clock)
    since = clock.now

    overlapped = store.create("acme", ECHO).job.job_id
    zombie = store.claim("w1", 30)
    assert zombie is not None and zombie.job_id == overlapped
    clock.advance(31)
    store.reap()
    assert store.claim("w2", 300) is not None  # still running at the end
    clock.advance(5)
    assert store.complete(zombie, {"late": True}).status is ReportStatus.FENCED

    clean = store.create("acme", ECHO).job.job_id
    early = store.claim("w3", 30)
    assert early is not None and early.job_id == clean
    clock.advance(31)
    store.reap()
    clock.advance(1)
    assert store.release(early).status is ReportStatus.FENCED
    clock.advance(1)
    assert store.claim("w4", 30) is not None

    assert main(["overlaps", "--since", iso(since)]) == 1
    text = capsys.readouterr().out
    assert overlapped in text and clean not in text
    assert "tenant acme  type demo.echo" in text and "overlapped attempt(s) 2" in text
    assert "overlaps: 1 jobs" in text

    assert main(["overlaps", "--since", iso(since), "--json"]) == 1
    (job,) = json.loads(capsys.readouterr().out)["jobs"]
    assert (job["job_id"], job["tenant_id"], job["type"]) == (overlapped, "acme", "demo.echo")
    assert [(a["attempt"], a["worker_id"], a["overlapped_with"]) for a in job["attempts"]] == [
        (1, "w1", [2]), (2, "w2", [1])]
    assert job["attempts"][1]["active_until"] is None, "attempt 2 is still running"

    assert main(["overlaps", "--since", iso(clock.now), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"] == []
