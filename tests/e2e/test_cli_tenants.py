"""`onward tenant set` / `onward tenant list` as an operator runs them: a child process against the embedded
endpoint's stack (the `environment` fixture), the jobs made and claimed through a JobStore on the same stack."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from onward.domain.dispatch import TenantPolicy
from onward.domain.models import NewJob
from onward.store.ports import Tenant
from onward.store.service import JobStore

ONWARD = [sys.executable, "-m", "onward.cli"]


def onward(environment: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ONWARD, *argv], env={**os.environ, **environment}, capture_output=True, text=True,
                          timeout=60, check=False)


def listed(environment: dict[str, str]) -> dict[str, Any]:
    """`onward tenant list --json`, by tenant id (and the window under "window")."""
    result = onward(environment, "tenant", "list", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    return {row["tenant_id"]: row for row in report["tenants"]} | {"window": report["window"]}


def row_of(text: str, tenant_id: str) -> list[str]:
    """The cells of the tenant's row of `onward tenant list`."""
    return next(line.split() for line in text.splitlines() if line.split()[:1] == [tenant_id])


def test_set_prints_before_and_after_and_list_shows_the_settings(environment):
    """Catches settings that are not written, written to the wrong field, or shown wrongly by either format
    (a cap of none not shown as "-"; a share without claims not "-")."""
    result = onward(environment, "tenant", "set", "acme", "--weight", "2.5", "--cap", "5", "--ready-shards", "4")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "tenant acme",
        "  before: not registered (the defaults: weight 1, no cap, ready shards 1)",
        "  after:  weight 2.5, cap 5, ready shards 4"]
    assert onward(environment, "tenant", "set", "globex").returncode == 0  # registered with the defaults

    text = onward(environment, "tenant", "list")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0].split() == ["tenant", "weight", "cap", "ready", "shards", "running",
                                                   "waiting", "claims", "share"]
    assert row_of(text.stdout, "acme") == ["acme", "2.5", "5", "4", "0", "0", "0", "-"]
    assert row_of(text.stdout, "globex") == ["globex", "1", "-", "1", "0", "0", "0", "-"]
    assert "claims: 0 in the last 60 s" in text.stdout and "a complete count" in text.stdout
    rows = listed(environment)
    assert rows["acme"] == {"tenant_id": "acme", "weight": 2.5, "cap": 5, "ready_shards": 4, "running": 0,
                            "waiting": 0, "claims": 0, "claim_share": None}
    assert rows["globex"]["cap"] is None and rows["window"]["seconds"] == 60 and rows["window"]["complete"]


def test_setting_only_the_weight_keeps_the_cap_and_the_shards(environment):
    """Catches a `set` that writes the defaults (or None) for the settings it was not given."""
    assert onward(environment, "tenant", "set", "acme", "--weight", "2", "--cap", "3",
                  "--ready-shards", "2").returncode == 0
    result = onward(environment, "tenant", "set", "acme", "--weight", "4")
    assert result.returncode == 0, result.stderr
    assert "before: weight 2, cap 3, ready shards 2\n  after:  weight 4, cap 3, ready shards 2" in result.stdout
    assert {key: listed(environment)["acme"][key] for key in ("weight", "cap", "ready_shards")} == {
        "weight": 4, "cap": 3, "ready_shards": 2}


def test_no_cap_removes_the_cap_and_keeps_the_rest(environment):
    """Catches --no-cap being ignored (the cap kept) or taken as "keep the cap"."""
    assert onward(environment, "tenant", "set", "acme", "--weight", "3", "--cap", "2").returncode == 0
    result = onward(environment, "tenant", "set", "acme", "--no-cap")
    assert result.returncode == 0, result.stderr
    assert "after:  weight 3, no cap, ready shards 1" in result.stdout
    assert listed(environment)["acme"]["cap"] is None and listed(environment)["acme"]["weight"] == 3


@pytest.mark.parametrize(("argv", "reason"), [
    (["acme", "--weight", "0"], "onward tenant: --weight: a tenant's weight must be a number from 0.001 to 1000, "
                                "not 0.0"),
    (["acme", "--weight", "-1"], "onward tenant: --weight: a tenant's weight must be a number from 0.001 to 1000"),
    (["acme", "--weight", "nan"], "onward tenant: --weight: a tenant's weight must be a number from 0.001 to 1000, "
                                  "not nan"),
    (["acme", "--weight", "inf"], "onward tenant: --weight: a tenant's weight must be a number from 0.001 to 1000, "
                                  "not inf"),
    (["acme", "--weight", "1e999"], "not inf"),  # a float that overflows is infinite
    # finite, but beyond DynamoDB's numbers (about 1e-130 to 1e126): once a decimal.Overflow / Underflow traceback
    (["acme", "--weight", "1e300"], "onward tenant: --weight: a tenant's weight must be a number from 0.001 to 1000, "
                                    "not 1e+300"),
    (["acme", "--weight", "1e-300"], "--weight: a tenant's weight must be a number from 0.001 to 1000, not 1e-300"),
    (["acme", "--weight", "1000.5"], "--weight: a tenant's weight must be a number from 0.001 to 1000, not 1000.5"),
    (["acme", "--weight", "lots"], "argument --weight: invalid float value: 'lots'"),
    (["acme", "--weight", "3", "--cap", "0"], "onward tenant: --cap: a tenant's cap must be a whole number >= 1"),
    (["acme", "--cap", "-3"], "onward tenant: --cap: a tenant's cap must be a whole number >= 1"),
    (["acme", "--cap", "2.5"], "argument --cap: invalid int value: '2.5'"),
    (["acme", "--cap", "3", "--ready-shards", "0"],
     "onward tenant: --ready-shards: ready shards must be a whole number from 1 to 64, not 0"),
    (["acme", "--ready-shards", "65"], "ready shards must be a whole number from 1 to 64, not 65"),
    (["acme", "--cap", "2", "--no-cap"], "argument --no-cap: not allowed with argument --cap"),
    (["Bad Tenant", "--weight", "2"], "onward tenant: invalid tenant id 'Bad Tenant'"),
    (["acme/x", "--weight", "2"], "onward tenant: invalid tenant id 'acme/x'"),
])
def test_a_bad_value_exits_2_with_the_reason_and_writes_nothing(environment, settings, dynamodb, argv, reason):
    """Catches a bad value that is written, or a good one given with it written alone (the registry
    changed); a refusal that comes as a traceback (not exit status 2) or does not say what is wrong."""
    store = JobStore(settings, client=dynamodb)
    store.register_tenant(Tenant("acme", TenantPolicy(2.0, 5), 4))
    before = store.tenants()
    result = onward(environment, "tenant", "set", *argv)
    assert result.returncode == 2, result.stdout + result.stderr
    assert reason in result.stderr and "Traceback" not in result.stderr and result.stdout == ""
    assert store.tenants() == before


def test_the_weights_at_the_bounds_are_stored_and_listed(environment):
    """The bounds themselves are settable end to end (DynamoDB stores them, the listing shows them): catches a
    bound refused by its own check (< instead of <=) or one chosen outside what DynamoDB can hold."""
    for weight in ("0.001", "1000"):
        result = onward(environment, "tenant", "set", "acme", "--weight", weight)
        assert result.returncode == 0, result.stderr
        assert listed(environment)["acme"]["weight"] == float(weight)


@pytest.mark.parametrize("argv", [["tenant", "set", "acme", "--weight", "2"], ["tenant", "list"]])
@pytest.mark.parametrize(("variables", "reason"), [
    ({}, "onward tenant: no AWS region is set: run `onward endpoint` and paste its export lines"),
    ({"AWS_REGION": "us-east-1"}, "onward tenant: JOBS_TABLE is not set (run `onward endpoint` and paste its "
                                  "export lines)"),
    ({"AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "JOBS_TABLE": "jobs",
      "OUTBOX_TABLE": "outbox"},
     "onward tenant: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
])
def test_without_a_deployment_the_commands_say_what_to_set(tmp_path, argv, variables, reason):
    """A valid command in an environment that names no deployment (nothing set, or only part of it): without
    the check in onward.cli.main.main it ends with botocore's NoRegionError or NoCredentialsError, or
    MissingSetting, as a traceback and exit status 1. Now: exit status 2 and one line saying what to set.
    (HOME is empty and instance metadata off, so no ~/.aws file or EC2 role supplies what is missing.)"""
    minimal = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path),
               "AWS_EC2_METADATA_DISABLED": "true", **variables}
    result = subprocess.run([*ONWARD, *argv], env=minimal, capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(reason) and result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == ""


def test_list_shows_running_waiting_and_each_tenants_share_of_the_minutes_claims(environment, settings, dynamodb):
    """Catches running and waiting read from the wrong counters (or claims counted as running), shares that
    do not add up to 100% over the tenants with claims, and a tenant without claims shown other than at 0%
    ("-" is for a minute without any claim, as /ops/tenants answers null then)."""
    store = JobStore(settings, client=dynamodb)  # the system clock: its claims are in the last minute
    for tenant, jobs in (("acme", 3), ("globex", 1)):
        for _ in range(jobs):
            store.create(tenant, NewJob(type="demo.echo"))
    leases = [store.claim("worker-1", 60) for _ in range(4)]
    assert sorted(lease.job.tenant_id for lease in leases if lease) == ["acme", "acme", "acme", "globex"]
    store.complete(next(lease for lease in leases if lease and lease.job.tenant_id == "acme"), {"ok": True})
    for tenant, jobs in (("acme", 2), ("initech", 1)):  # waiting: created after every claim
        for _ in range(jobs):
            store.create(tenant, NewJob(type="demo.echo"))

    rows = listed(environment)
    assert [(rows[t]["running"], rows[t]["waiting"], rows[t]["claims"], rows[t]["claim_share"])
            for t in ("acme", "globex", "initech")] == [(2, 2, 3, 0.75), (1, 0, 1, 0.25), (0, 1, 0, 0.0)]
    assert rows["window"]["claims"] == 4 and rows["window"]["complete"]
    text = onward(environment, "tenant", "list").stdout
    assert row_of(text, "acme")[4:] == ["2", "2", "3", "75.0%"]
    assert row_of(text, "globex")[4:] == ["1", "0", "1", "25.0%"]
    assert row_of(text, "initech")[4:] == ["0", "1", "0", "0.0%"]
    assert "claims: 4 in the last 60 s" in text and "a complete count" in text


def test_ready_shards_are_raised_not_lowered_and_raising_keeps_every_job_claimable(environment, settings,
                                                                                   dynamodb):
    """Raising the shards spreads new jobs wider while the ones queued before are still claimed; lowering
    them is refused with the reason (exit 2, nothing written): jobs queued and attempts counted under the
    dropped shards would be out of the counters claims and `tenant list` read, and a cap could be passed."""
    assert onward(environment, "tenant", "set", "acme", "--ready-shards", "2").returncode == 0
    store = JobStore(settings, client=dynamodb)
    job_ids = {store.create("acme", NewJob(type="demo.echo")).job.job_id for _ in range(4)}
    assert onward(environment, "tenant", "set", "acme", "--ready-shards", "4").returncode == 0
    job_ids |= {store.create("acme", NewJob(type="demo.echo")).job.job_id for _ in range(4)}
    assert listed(environment)["acme"]["waiting"] == 8
    lowered = onward(environment, "tenant", "set", "acme", "--ready-shards", "1")
    assert lowered.returncode == 2 and "raised, not lowered" in lowered.stderr
    assert listed(environment)["acme"]["ready_shards"] == 4
    claimed = {lease.job.job_id for _ in range(12) if (lease := store.claim("worker-1", 60)) is not None}
    assert claimed == job_ids
