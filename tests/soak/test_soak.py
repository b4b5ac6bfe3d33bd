"""The short crash-point soak (part of `make test`); the long one is `python -m tests.soak.driver --jobs 20000`.

A few hundred jobs of four tenants run through workers, reaper, relay and projector while every named fault
point fires, at random and aimed at chosen jobs; then the audit (tests/soak/audit.py) must find nothing.
How each check would break without the code that keeps it:
- without the attempt condition on every worker commit, a zombie's late completion would be applied: the
  stored result would carry the zombie's token ("no completion applied from a fenced attempt");
- without `_record_fenced`, a zombie's run would stay `lease_expired` ("every zombie attempt is visible");
- without the one-transaction transition, a crash at store.before/after_commit could leave a row version
  without its outbox event ("outbox versions are 1..N");
- without the relay writing its checkpoint only after PutRecords, a crash before it would lose the batch
  ("every outbox event reached Kinesis"), and without the version guard the redelivered copies of a crash
  after it would be applied again ("projector applied each event exactly once", and the view would lag);
- without the projector resuming at the crashed batch, records would be lost; without the counts, a
  redelivery could not be told from a lost write ("duplicate+stale == injected redeliveries").
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from onward_infra.endpoint import EmbeddedEndpoint
from tests.soak.driver import STREAM_SHARDS, SoakConfig, run_soak
from tests.soak.faults import RANDOM_POINTS, Aim

pytestmark = pytest.mark.integration


@pytest.fixture
def splitting_stack(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[EmbeddedEndpoint, dict[str, str]]]:
    """A stack on AWS's topology: 4 shards per DynamoDB stream, one splitting every 3 s while in use."""
    with EmbeddedEndpoint(stream_shards=STREAM_SHARDS, split_every_s=3.0) as endpoint:
        environment = endpoint.deploy("soak").environment
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        yield endpoint, environment


def test_short_soak_with_every_fault_kind_passes_its_audit(splitting_stack):
    """On the multi-shard, splitting topology: the outbox stream starts with 4 shards and splits during the
    run, and the events stream doubles its shards halfway through the jobs. Without the relay publishing
    whatever it is handed (no skipping by a position it cannot attribute to a shard), a split could leave
    records behind ("every outbox event reached Kinesis"); without pollers reading children after parents,
    a job's versions could land out of order (the view would go backwards or count stale redeliveries)."""
    endpoint, environment = splitting_stack
    started = time.monotonic()
    result = run_soak(environment, SoakConfig(jobs=200, workers=6, aimed_per_kind=3, seed=11,
                                                        timeout_s=400))
    print(f"\nshort soak: {result.jobs} jobs in {time.monotonic() - started:.1f} s\n{result.audit.table()}")
    outbox = endpoint.client("dynamodb").describe_table(TableName=environment["OUTBOX_TABLE"])["Table"]
    streams = endpoint.client("dynamodbstreams").describe_stream(StreamArn=outbox["LatestStreamArn"])
    assert len(streams["StreamDescription"]["Shards"]) > STREAM_SHARDS  # it split while the soak ran
    kinesis = endpoint.client("kinesis").list_shards(StreamName=environment["EVENTS_STREAM"])["Shards"]
    assert any("ParentShardId" in shard for shard in kinesis)  # and the events stream was resharded

    assert result.audit.ok, "\n".join(f"{line.check}: {line.violations} ({line.detail})"
                                      for line in result.audit.failed())
    fired = dict(result.audit.figures)
    for kind in set(RANDOM_POINTS.values()):
        assert fired.get(f"fired {kind}", 0) >= 2, f"{kind} fired too rarely: the drill did not test it"
    for aim in Aim:
        assert fired.get(f"fired aimed {aim}", 0) == 3, f"{aim} was not aimed at each of its jobs"
    assert fired["fenced runs (zombie reports recorded)"] >= 3
    assert fired["  relay redeliveries (Kinesis copies beyond the first)"] > 0
    assert fired["  projector redeliveries (records handled again after a crash)"] > 0


def test_the_long_soak_command_runs_on_an_endpoint_process_and_prints_its_audit():
    """`make soak` as a person runs it (here with few jobs): the endpoint in a child process, progress on
    stderr, the audit table on stdout, exit status 0 only when every check holds."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "tests.soak.driver", "--jobs", "60", "--workers", "4",
                             "--aimed-per-kind", "1", "--seed", "5", "--timeout", "300"],
                            capture_output=True, text=True, timeout=400, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "soak: 60 jobs, 4 workers, 4 tenants, seed 5:" in result.stdout
    assert "checks" in result.stdout and "violations=0" in result.stdout and result.stdout.rstrip().endswith(
        "AUDIT PASSED")


def test_the_audit_holds_across_a_restart_of_the_stack_from_its_data_directory():
    """Halfway through, every component stops as `onward up` does on Ctrl-C, the endpoint process stops
    (its last snapshot) and starts again from its data directory on the same port, and everything resumes
    from the checkpoints. Without the restore the restarted endpoint would be a fresh stack (the driver
    checks that the stack's names came back); without the streams' positions and sequence numbers in the
    snapshot, the relay and projector would skip or re-apply events ("every outbox event reached Kinesis",
    "projector applied each event exactly once"); without the final snapshot, the jobs created just before
    the restart would be missing ("every submitted job exists")."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "tests.soak.driver", "--jobs", "120", "--workers", "4",
                             "--aimed-per-kind", "1", "--seed", "9", "--timeout", "300", "--restart-at", "0.5"],
                            capture_output=True, text=True, timeout=400, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "restarting the endpoint from its data directory" in result.stderr
    assert "the stack restarted 1 time(s) from its data directory" in result.stdout
    assert result.stdout.rstrip().endswith("AUDIT PASSED")
