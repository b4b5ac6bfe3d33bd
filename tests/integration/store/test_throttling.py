"""Throttling and transient errors, injected at the client boundary with botocore event hooks (the code
under test is not patched): each is retried with backoff, counted, and loses or reorders no job's events.

What tests/integration/pipeline/test_relay.py already covers (entries of a PutRecords refused, retried alone, kept in
job order, through the relay handler) is not repeated; this adds whole calls refused (botocore's standard
retry mode from onward.settings), DynamoDB throttling and TransactionConflict on a claim (botocore retries
the first, the store's re-read loop the second), and the Kinesis drill against kinesis-local (npm).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from onward.domain.models import NewJob
from onward.domain.states import JobState
from onward.settings import Settings
from onward.store.service import JobStore
from tests.integration.kinesis_drill import THROTTLED, RefusedCalls, create_stream, error_response, run_drill

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
ECHO = NewJob(type="demo.echo", params={"n": 1})
DYNAMODB_ERROR = "com.amazonaws.dynamodb.v20120810#"


def _throttling(request: Any) -> Any:
    return error_response(request.url, DYNAMODB_ERROR + "ThrottlingException",
                          "Rate of requests exceeds the allowed throughput.", json_version="1.0")


def _cancelled_by(code: str) -> Any:
    """TransactionCanceledException naming `code` for the first item, None for the others: what DynamoDB
    answers when a concurrent transaction (TransactionConflict) or a moved job row (ConditionalCheckFailed)
    stops the claim. Nothing is written."""
    def answer(request: Any) -> Any:
        items = len(json.loads(request.body)["TransactItems"])
        reasons = [{"Code": code, "Message": f"{code} (drill)"}] + [{"Code": "None"}] * (items - 1)
        message = f"Transaction cancelled, please refer cancellation reasons for specific reasons [{code}]"
        return error_response(request.url, DYNAMODB_ERROR + "TransactionCanceledException", message,
                              json_version="1.0", extra={"CancellationReasons": reasons})
    return answer


@pytest.fixture
def dynamodb_client(settings: Settings, stack_environment) -> Any:
    """A DynamoDB client with the production configuration (onward.settings: standard retry mode)."""
    return settings.client("dynamodb")


@pytest.fixture
def production_store(settings: Settings, dynamodb_client) -> JobStore:
    return JobStore(settings, client=dynamodb_client)


def _history(store: JobStore, job_id: str) -> tuple[list[int], list[int]]:
    return [e.version for e in store.events(job_id)], [r.attempt for r in store.runs(job_id)]


def test_a_throttled_claim_is_retried_by_botocore_with_backoff_and_commits_once(production_store, dynamodb_client):
    """Without the standard retry mode in onward.settings (legacy mode's budget, or retries off) a claim
    meeting ThrottlingException would surface as an error to the worker; with it, the transaction is
    sent again after a backoff and commits once: one attempt, one run record, versions 1, 2."""
    store = production_store
    job_id = store.create("acme", ECHO).job.job_id
    throttled = RefusedCalls(dynamodb_client, "dynamodb", "TransactWriteItems", 2, _throttling)

    lease = store.claim("w1", 30)

    assert lease is not None and lease.job_id == job_id and lease.attempt == 1
    assert (throttled.refused, throttled.sends) == (2, 3)
    assert throttled.retry_attempts == [2], "botocore counts the retries of the claim's transaction"
    assert _history(store, job_id) == ([1, 2], [1])
    assert store.stats.lost_races() == {}, "a throttle is not a lost race: the store decided once"


def test_throttling_past_the_retry_budget_fails_the_claim_and_writes_nothing(settings, dynamodb_client):
    """The budget is finite: past it the claim raises, and since a refused transaction writes nothing,
    the job stays queued at v1 with no run record; the next claim takes attempt 1. Without the
    transaction (separate writes), a give-up halfway would leave a run without a claim or a claim without
    its outbox event. (The production budget is 8 retries after the first try, whose backoff adds up to
    about a minute; this drill gives up after 2 retries, the same mode with a smaller budget.)"""
    assert dynamodb_client.meta.config.retries == {"mode": "standard", "total_max_attempts": 9}  # 8 retries
    client = boto3.client("dynamodb", endpoint_url=settings.endpoint_url, region_name=settings.region,
                          config=Config(retries={"mode": "standard", "max_attempts": 2}))
    store = JobStore(settings, client=client)
    job_id = store.create("acme", ECHO).job.job_id
    throttled = RefusedCalls(client, "dynamodb", "TransactWriteItems", 10**6, _throttling)

    with pytest.raises(ClientError) as raised:
        store.claim("w1", 30)

    assert raised.value.response["Error"]["Code"] == "ThrottlingException"
    assert throttled.sends == 3, "botocore's max_attempts counts retries: the first try and 2 more"
    job = store.get(job_id)
    assert (job.state, job.version, job.attempt) == (JobState.QUEUED, 1, 0)
    assert _history(store, job_id) == ([1], [])
    throttled.times = 0  # the throttling ends
    lease = store.claim("w1", 30)
    assert lease is not None and lease.attempt == 1 and _history(store, job_id) == ([1, 2], [1])


@pytest.mark.parametrize("code", ["TransactionConflict", "ConditionalCheckFailed"])
def test_a_cancelled_claim_transaction_is_re_read_decided_again_and_counted(production_store, dynamodb_client, code):
    """TransactionCanceledException is not retried by botocore (it is not transient: the data decides).
    Without the store's re-read loop the claim would give up on a job that is still due; without deciding
    again from the re-read row it could commit a stale decision. The store re-reads, claims, and counts
    each lost race by cause."""
    store = production_store
    job_id = store.create("acme", ECHO).job.job_id
    cancelled = RefusedCalls(dynamodb_client, "dynamodb", "TransactWriteItems", 2, _cancelled_by(code))

    lease = store.claim("w1", 30)

    assert lease is not None and lease.job_id == job_id and lease.attempt == 1
    assert (cancelled.refused, cancelled.sends) == (2, 3)
    assert cancelled.retry_attempts == [0, 0, 0], "botocore did not retry them (3 calls): the store did"
    assert store.stats.lost_races() == {code: 2}
    assert _history(store, job_id) == ([1, 2], [1])


def test_a_job_whose_events_meet_throttling_keeps_them_in_order_through_every_retry(production_store, dynamodb_client):
    """A job's whole life under throttling (each of its transactions throttled once, its claim also
    conflicting once): every transition commits once, in order, versions 1..3 with no gap or duplicate."""
    store = production_store
    throttled = RefusedCalls(dynamodb_client, "dynamodb", "TransactWriteItems", 2, _throttling)
    job_id = store.create("acme", ECHO).job.job_id  # create's transaction: throttled twice, then commits
    conflict = RefusedCalls(dynamodb_client, "dynamodb", "TransactWriteItems", 1, _cancelled_by("TransactionConflict"))
    lease = store.claim("w1", 30)
    throttled.refused = 1  # one more throttle, for the completion
    report = store.complete(lease, {"ok": True})

    assert report.applied and report.job.state is JobState.SUCCEEDED and report.job.version == 3
    assert throttled.refused == 2 and conflict.refused == 1
    assert [(e.version, e.status) for e in store.events(job_id)] == [
        (1, JobState.QUEUED), (2, JobState.RUNNING), (3, JobState.SUCCEEDED)]
    assert [(r.attempt, r.outcome.value) for r in store.runs(job_id)] == [(1, "succeeded")]


# --- Kinesis: whole calls refused, on the embedded endpoint and on kinesis-local ---------------------------

def _assert_drill(outcome: dict[str, Any]) -> None:
    """18 events of 6 jobs: the first PutRecords call is refused twice whole (botocore retries it), then
    3 of its 6 entries are refused, then 1 of those 3 (the publisher retries only them, after a growing
    backoff, before any job's next version goes out)."""
    assert outcome["published"] == outcome["events"] == 18
    assert outcome["refused_calls"] == 2 and outcome["retry_attempts"][0] == 2
    assert outcome["sends"] == 2 + outcome["entry_calls"] == 2 + 5  # 3 calls for the v1s, 1 per v2s, v3s
    assert outcome["retried_entries"] == 4 and outcome["error_codes"] == {THROTTLED: 4}
    assert len(outcome["publisher_sleeps"]) == 2
    assert set(outcome["copies_per_event"].values()) == {1} and len(outcome["copies_per_event"]) == 18
    assert all(versions == [1, 2, 3] for versions in outcome["versions_per_job"].values())
    assert set(outcome["shards_per_job"].values()) == {1}


def test_kinesis_throttling_whole_calls_and_entries_loses_and_reorders_nothing(settings, stack_environment):
    """Without botocore's retry of a refused call, the publisher would see an exception and the relay
    batch would fail; without the publisher's per-entry retry, refused entries would be lost; without
    holding a job's next version back, v2 could land before a refused v1."""
    kinesis = settings.client("kinesis")
    create_stream(kinesis, "drill-embedded")
    _assert_drill(asdict(run_drill(kinesis, "drill-embedded")))


KINESIS_LOCAL_VERSION = "0.6.2"
KINESIS_LOCAL_DIR = ROOT / ".cache" / "kinesis-local"  # gitignored; installed by this fixture


def _install_kinesis_local() -> Path:
    main = KINESIS_LOCAL_DIR / "node_modules" / "kinesis-local" / "main.js"
    if not main.exists():
        npm = shutil.which("npm")
        assert npm is not None, "npm is needed for the kinesis-local drill (apt-get install npm)"
        KINESIS_LOCAL_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run([npm, "install", "--prefix", str(KINESIS_LOCAL_DIR), "--no-audit", "--no-fund",
                        "--loglevel=error", f"kinesis-local@{KINESIS_LOCAL_VERSION}"], check=True, timeout=300)
    return main


NAMESPACE_SCRIPT = r"""
set -e
ip link set lo up
node "$KINESIS_LOCAL_MAIN" > "$KINESIS_LOCAL_LOG" 2>&1 &
server=$!
trap 'kill $server' EXIT
for _ in $(seq 100); do
  (exec 3<>/dev/tcp/127.0.0.1/$KINESIS_MOCK_PLAIN_PORT) 2>/dev/null && break
  sleep 0.1
done
"$PYTHON" -m tests.integration.kinesis_drill --endpoint "http://127.0.0.1:$KINESIS_MOCK_PLAIN_PORT"
"""


def test_kinesis_throttling_drill_against_kinesis_local_in_a_private_network_namespace(tmp_path):
    """The same drill against kinesis-local, a second Kinesis implementation with AWS's 56-digit sequence
    numbers. It binds every interface, so it runs inside `unshare -n` (a network namespace of its own with
    only loopback): nothing outside this process tree can reach it."""
    main = _install_kinesis_local()
    port = _free_port()
    environment = {**os.environ, "KINESIS_LOCAL_MAIN": str(main), "KINESIS_LOCAL_LOG": str(tmp_path / "server.log"),
                   "KINESIS_MOCK_CERT_PATH": str(main.parent / "server.json"), "KINESIS_MOCK_PLAIN_PORT": str(port),
                   "KINESIS_MOCK_TLS_PORT": str(_free_port()), "PYTHON": sys.executable,
                   "AWS_ACCESS_KEY_ID": "drill", "AWS_SECRET_ACCESS_KEY": "drill", "PYTHONPATH": str(ROOT)}
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        environment.pop(name, None)
    finished = subprocess.run(["unshare", "-n", "bash", "-c", NAMESPACE_SCRIPT], cwd=ROOT, env=environment,
                              capture_output=True, text=True, timeout=120, check=False)
    log = (tmp_path / "server.log").read_text() if (tmp_path / "server.log").exists() else ""
    assert finished.returncode == 0, f"{finished.stderr[-3000:]}\nserver log:\n{log[-2000:]}"
    outcome = json.loads(finished.stdout.strip().splitlines()[-1])
    _assert_drill(outcome)
    assert outcome["sequence_digits"] == 56, "kinesis-local numbers records as AWS does"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
