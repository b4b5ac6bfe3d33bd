"""`onward bulk replay` / `onward bulk cancel` as an operator runs them: a child process against the embedded
endpoint's stack (the `environment` fixture), the jobs made through a JobStore on the same stack and projected
into the status view (the `pipeline` fixture) before the command selects from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from onward.domain.models import ErrorSummary, NewJob
from onward.domain.states import JobState
from onward.store.service import JobStore

ONWARD = [sys.executable, "-m", "onward.cli"]


def onward(environment: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ONWARD, *argv], env={**os.environ, **environment}, capture_output=True, text=True,
                          timeout=120, check=False)


def dead(store: JobStore, tenant: str, count: int) -> list[str]:
    job_ids = []
    for _ in range(count):
        job_id = store.create(tenant, NewJob(type="demo.fail", max_attempts=1)).job.job_id
        lease = store.claim("bulk-cli", 30)
        assert lease is not None and lease.job_id == job_id
        store.fail(lease, ErrorSummary.of("Boom", "failed for good"), permanent=True)
        job_ids.append(job_id)
    return job_ids


def test_replay_is_a_dry_run_until_apply_then_reports_progress(environment, settings, dynamodb, pipeline):
    """Catches a command that acts without --apply, a dry run that does not say how to apply it, an --apply
    without progress or final report, and another tenant's jobs being touched."""
    store = JobStore(settings, client=dynamodb)
    acme = dead(store, "acme", 3)
    (globex,) = dead(store, "globex", 1)
    pipeline.drain()

    dry = onward(environment, "bulk", "replay", "--tenant", "acme", "--state", "dead", "--type", "demo.fail")
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert lines[0] == "3 dead jobs match (tenant acme; type demo.fail)"
    assert sorted(line.strip() for line in lines[1:4]) == sorted(acme)
    assert lines[-1] == "dry run: nothing changed. To replay them, run the same command with --apply"
    assert {store.get(job_id).state for job_id in [*acme, globex]} == {JobState.DEAD}

    applied = onward(environment, "bulk", "replay", "--tenant", "acme", "--apply")
    assert applied.returncode == 0, applied.stderr
    progress, final = applied.stdout.splitlines()
    assert progress == "  3/3 done: 3 applied, 0 skipped, 0 failed"
    assert final.startswith("replay of 3 dead or quarantined jobs (tenant acme): applied 3 (queued 3), skipped 0, "
                            "failed 0, unprocessed 0 in ")
    assert {store.get(job_id).state for job_id in acme} == {JobState.QUEUED}
    assert store.get(globex).state is JobState.DEAD


def test_cancel_reports_as_json_and_bad_filters_exit_2(environment, settings, dynamodb, pipeline):
    """Catches --json not being the API's report (its counts adding up), a cancel without --tenant or with a
    state it does not act on being run, and an empty window not being refused with its reason (exit 2)."""
    store = JobStore(settings, client=dynamodb)
    queued = [store.create("acme", NewJob(type="demo.sleep")).job.job_id for _ in range(2)]
    pipeline.drain()
    result = onward(environment, "bulk", "cancel", "--tenant", "acme", "--apply", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["action"], report["dry_run"], report["matched"], report["applied_by_outcome"]) == (
        "cancel", False, 2, {"cancelled": 2})
    assert report["matched"] == report["applied"] + sum(report["skipped"].values()) + report["failed"] + report[
        "unprocessed"]
    assert {store.get(job_id).state for job_id in queued} == {JobState.CANCELLED}

    for argv, said in ((["cancel"], "--tenant"), (["cancel", "--tenant", "acme", "--state", "dead"], "invalid choice"),
                       (["replay", "--since", "2026-11-30T08:00:00"], "has no zone"),
                       (["replay", "--since", "2026-11-30T08:00:00Z", "--until", "2026-11-30T07:00:00Z"],
                        "--until: until is before since")):
        refused = onward(environment, "bulk", *argv)
        assert refused.returncode == 2 and said in refused.stderr, (argv, refused.stderr)
