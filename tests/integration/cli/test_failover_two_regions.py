"""`onward failover --to B` between two Regions of the embedded endpoint with the replicator between them
(infra/onward_infra/replication), the witness an SSM parameter in a third Region: jobs created in A, one
running there; the command run as an operator runs it, with B's environment; then B is home at epoch 1 with
every job adopted (the running one's run record closed `region_failover`, queued again), and A's processes,
reading the witness, stop: A's worker claims nothing more.

How it would break without the code: without the witness A would go on claiming after B became home (two
homes: both Regions' conditions pass, last writer wins mixes their rows); without adoption B's rows would
keep A's epoch and every transition B's store makes on them would be refused; without closing the running
attempt's run record B would run the job again with an attempt still open; without the API's write gate
(issue 39's gaps) B's API would take a create while B adopts A's jobs."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from onward.api import app as api
from onward.bootstrap import Deployment
from onward.cli.main import main
from onward.domain.models import NewJob
from onward.domain.regions import epoch_of_version
from onward.domain.states import RunOutcome
from onward.runtime import authority
from onward.runtime.authority import AuthorityState
from onward.runtime.worker import Registry, Worker
from onward.settings import Settings
from onward.store.service import JobStore
from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.gateway import build_event
from onward_infra.lambda_context import LocalLambdaContext
from onward_infra.replication.replicator import Replicator, tables_of

pytestmark = pytest.mark.integration

A, B, WITNESS_REGION = "ap-northeast-3", "me-south-1", "ap-south-1"  # Regions no other test of the session uses


@pytest.fixture(scope="module")
def regions() -> Iterator[tuple[dict[str, str], dict[str, str], Replicator]]:
    with (EmbeddedEndpoint(region=A) as home, EmbeddedEndpoint(region=B) as standby,
          EmbeddedEndpoint(region=WITNESS_REGION) as witness):
        environments = {A: home.deploy().environment, B: standby.deploy().environment}
        authority_variables = {"ONWARD_WITNESS": f"ssm:{WITNESS_REGION}:/onward/failover-test/home",
                               "ONWARD_WITNESS_ENDPOINT_URL": witness.url, "ONWARD_HOME_REGION": A,
                               "ONWARD_AUTHORITY_LEASE_S": "2", "ONWARD_AUTHORITY_CHECK_S": "0.1"}
        with Replicator([home, standby], tables_of(environments)) as replicator:
            yield ({**environments[A], **authority_variables}, {**environments[B], **authority_variables},
                   replicator)


def test_failover_to_b_adopts_the_jobs_there_and_stops_a(
        regions: tuple[dict[str, str], dict[str, str], Replicator], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    home_environment, standby_environment, replicator = regions
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, home_environment[name])
    home = Deployment(Settings.from_environment(home_environment), environ=home_environment).job_store
    lease = authority.lease_of(home)
    assert lease is not None and lease.is_home()  # the witness never written: ONWARD_HOME_REGION is home
    jobs = [home.create("acme", NewJob(type="demo.echo")).job.job_id for _ in range(3)]
    running = home.claim("w-a", 60.0)
    assert running is not None
    assert replicator.wait_idle()

    for name, value in standby_environment.items():  # the operator's shell: B's exports (and B's API's)
        monkeypatch.setenv(name, value)
    _local_tokens(monkeypatch)
    assert _create_in_b() == 202  # B's API before the failover (its epoch item at 0)
    answered_during_adoption: list[int] = []
    rebuild_counters = JobStore.rebuild_counters

    def create_in_b_while_adopting(store: JobStore, epoch: int) -> int:
        time.sleep(0.2)  # (past B's API's epoch cache period: ONWARD_AUTHORITY_CHECK_S)
        answered_during_adoption.append(_create_in_b())
        return rebuild_counters(store, epoch)

    monkeypatch.setattr(JobStore, "rebuild_counters", create_in_b_while_adopting)
    exit_status = main(["failover", "--to", B, "--reason", "drill: A lost", "--fence-window-s", "1", "--yes",
                        "--json"])
    captured = capsys.readouterr()
    assert exit_status == 0, captured.err
    # issue 39's gaps: B's API refused the create while B adopted A's jobs, and accepts it once the adoption is
    # recorded (within its epoch cache's period)
    assert answered_during_adoption == [503]
    deadline = time.monotonic() + 10
    while (answered := _create_in_b()) != 202 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert answered == 202
    report: dict[str, Any] = json.loads(captured.out)
    # (A's 3, and the one B's API created at epoch 0 before the failover)
    assert (report["epoch"], report["previous_home"], report["adopted"], report["runs_closed"]) == (1, A, 4, 1)
    assert report["adopted_at"] is not None
    assert [step["step"] for step in report["steps"]] == [1, 2, 3, 4, 5, 6]

    standby = Deployment(Settings.from_environment(standby_environment)).job_store
    epoch = standby.region_epoch()
    assert (epoch.epoch, epoch.home, epoch.previous_home) == (1, B, A)
    for job_id in jobs:
        assert epoch_of_version(standby.get(job_id, "acme").version) == 1  # adopted: the epoch's versions
    assert standby.runs(running.job_id, "acme")[-1].outcome is RunOutcome.REGION_FAILOVER
    assert standby.get(running.job_id, "acme").state.value == "queued"

    # A's processes read the witness at their next check and stop at once: A's worker claims nothing more
    waiting = [job_id for job_id in jobs if home.get(job_id, "acme").state.value == "queued"]
    assert waiting  # there is work A could claim, were it home
    worker = Worker(home, _registry())
    assert not lease.is_home()  # its check interval (0.1 s) has passed: this call read the witness
    assert lease.state is AuthorityState.STANDBY
    assert not worker.run_once()
    assert all(home.get(job_id, "acme").state.value == "queued" for job_id in waiting)

    status_exit = main(["region-status", "--json"])
    status = json.loads(capsys.readouterr().out)
    assert status_exit == 0
    assert (status["epoch"]["epoch"], status["witness"], status["this_region_is_home"]) == (
        1, {"home": B, "epoch": 1}, True)


def _local_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONWARD_TOKENS", "acme=acme-region-secret")
    monkeypatch.setenv("ONWARD_OPERATOR_TOKEN", "operator-region-secret")
    monkeypatch.delenv("ONWARD_AUTH", raising=False)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")


def _create_in_b() -> int:
    """POST /jobs to the API of the environment in os.environ (B's): its status."""
    event = build_event("POST", "/jobs", [("Authorization", "Bearer acme-region-secret"),
                                          ("Content-Type", "application/json")], b'{"type": "demo.echo"}')
    status: int = api.handler(event, LocalLambdaContext("onward-api"))["statusCode"]
    return status


def _registry() -> Registry:
    registry = Registry()
    registry.register("demo.echo")(lambda context: "ok")
    return registry


def test_bad_input_is_refused_with_exit_status_2_and_changes_nothing(
        regions: tuple[dict[str, str], dict[str, str], Replicator], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Without the checks before step 1 a typo'd Region, or the Region already home, would get a witness
    naming it and an epoch raised: the real home would stop."""
    _, standby_environment, _ = regions
    for name, value in standby_environment.items():
        monkeypatch.setenv(name, value)
    assert main(["region-status", "--json"]) == 0
    before = json.loads(capsys.readouterr().out)
    for to, reason in ((before["home"], "home already"), ("xx-nowhere-1", "no such Region")):
        assert main(["failover", "--to", to, "--reason", "typo", "--fence-window-s", "0", "--yes"]) == 2
        assert reason in capsys.readouterr().err
    monkeypatch.delenv("ONWARD_WITNESS")
    assert main(["failover", "--to", A, "--reason", "no witness", "--yes"]) == 2
    assert "ONWARD_WITNESS is not set" in capsys.readouterr().err
    monkeypatch.setenv("ONWARD_WITNESS", standby_environment["ONWARD_WITNESS"])
    assert main(["region-status", "--json"]) == 0
    after = json.loads(capsys.readouterr().out)
    assert (after["epoch"], after["witness"]) == (before["epoch"], before["witness"])
