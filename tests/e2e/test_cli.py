"""The command line as a person uses it: `onward endpoint`, `onward worker`, `onward up`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import boto3
import pytest

import onward_infra.endpoint
from onward.domain.models import NewJob
from onward.domain.states import TERMINAL_STATES
from onward.store.service import JobStore

ONWARD = [sys.executable, "-m", "onward.cli"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def read_exports(process: subprocess.Popen) -> dict[str, str]:
    return onward_infra.endpoint.read_exports(process.stdout)


def test_endpoint_prints_the_environment_and_serves_the_template_tables():
    port = free_port()
    process = subprocess.Popen([*ONWARD, "endpoint", "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        environment = read_exports(process)
        assert environment["AWS_ENDPOINT_URL"] == f"http://127.0.0.1:{port}"
        assert {"AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "JOBS_TABLE",
                "OUTBOX_TABLE"} <= environment.keys()
        client = boto3.client(
            "dynamodb", endpoint_url=environment["AWS_ENDPOINT_URL"], region_name=environment["AWS_DEFAULT_REGION"],
            aws_access_key_id="testing", aws_secret_access_key="testing",
        )
        tables = client.list_tables()["TableNames"]
        assert environment["JOBS_TABLE"] in tables and environment["OUTBOX_TABLE"] in tables
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=15) == 0


def test_worker_command_runs_a_module_registry_against_the_environment(environment, settings, dynamodb):
    store = JobStore(settings, client=dynamodb)
    job_ids = [store.create("acme", NewJob(type="demo.echo", params={"n": n})).job.job_id for n in range(5)]
    process = subprocess.Popen(
        [*ONWARD, "worker", "--module", "onward.runtime.demo_jobs", "--concurrency", "2"],
        env={**os.environ, **environment}, stdout=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if all(store.get(job_id).state in TERMINAL_STATES for job_id in job_ids):
                break
            time.sleep(0.2)
        assert [store.result(job_id) for job_id in job_ids] == [{"n": n} for n in range(5)]
    finally:
        process.send_signal(signal.SIGINT)
        try:
            assert process.wait(timeout=30) == 0
        finally:
            process.kill()  # a worker that ignored the stop must not poll the session's endpoint for later tests


def test_worker_command_refuses_a_module_without_a_registry(environment):
    result = subprocess.run([*ONWARD, "worker", "--module", "json"], env={**os.environ, **environment},
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and "registry" in result.stderr


def test_up_runs_the_demo_to_its_terminal_states():
    result = subprocess.run([*ONWARD, "up", "--demo", "--port", str(free_port()), "--http-port", str(free_port()),
                             "--exit-when-done"], capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, result.stderr
    assert "All demo jobs reached a terminal state, and the status view shows each one" in result.stdout
    final = result.stdout.split("shows each one:")[1]
    for state in ("succeeded", "dead", "cancelled", "quarantined"):
        assert state in final
    assert "HTTP API and status page: http://127.0.0.1:" in result.stdout
    assert "tenant acme" in result.stdout and "operator" in result.stdout
    assert "run-history archive (Parquet): " in result.stdout  # where the archiver writes (a temporary directory)


def test_up_serves_the_http_api_with_the_tokens_it_prints():
    """`onward up` starts the HTTP API with the tokens given; the tenant comes from the token."""
    import json
    import urllib.request

    http_port = free_port()
    process = subprocess.Popen([*ONWARD, "up", "--port", str(free_port()), "--http-port", str(http_port),
                                "--token", "acme=s3cret", "--operator-token", "op"], stdout=subprocess.PIPE,
                               text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if "Serving; Ctrl-C" in process.stdout.readline():
                break
        request = urllib.request.Request(f"http://127.0.0.1:{http_port}/jobs", method="POST",
                                         data=json.dumps({"type": "demo.echo", "params": {"x": 1}}).encode(),
                                         headers={"Authorization": "Bearer s3cret",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            created = json.loads(response.read())
        assert response.status == 202 and created["status"] == "queued"
        job_url = f"http://127.0.0.1:{http_port}/jobs/{created['job_id']}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with urllib.request.urlopen(urllib.request.Request(
                    job_url, headers={"Authorization": "Bearer s3cret"}), timeout=10) as response:
                job = json.loads(response.read())
            if job["visible"] and job["status"] == "succeeded":
                break
            time.sleep(0.3)
        assert job["visible"] and job["status"] == "succeeded" and job["version"] == 3
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0


def test_lag_prints_the_pipelines_age_backlog_and_retention_cover(environment):
    import json

    result = subprocess.run([*ONWARD, "lag", "--window-s", "0.2", "--json"], env={**os.environ, **environment},
                            capture_output=True, text=True, timeout=60, check=False)
    report = json.loads(result.stdout)
    assert report["backlog"] == 0 and report["stream_retention_s"] == 24 * 3600
    assert report["processing_age_s"] is None  # nothing projected yet: unknown, so nothing is said to cover
    assert result.returncode == 1 and report["outbox_covers"] is False
    text = subprocess.run([*ONWARD, "lag", "--window-s", "0.2"], env={**os.environ, **environment},
                          capture_output=True, text=True, timeout=60, check=False)  # exits 1: nothing projected
    assert "processing age       unknown (a shard has no watermark yet)" in text.stdout
    assert "stream retention     24.0 h" in text.stdout


def test_an_endpoint_process_serves_its_stack_until_stopped():
    with onward_infra.endpoint.EndpointProcess() as emulator:
        environment = emulator.environment
        client = boto3.client("dynamodb", endpoint_url=emulator.url, region_name=environment["AWS_DEFAULT_REGION"],
                              aws_access_key_id="testing", aws_secret_access_key="testing")
        assert environment["JOBS_TABLE"] in client.list_tables()["TableNames"]
    assert emulator._process is not None and emulator._process.returncode == 0  # stopped by SIGINT, cleanly


def test_onward_endpoint_serves_the_stream_topology_it_is_asked_for():
    """`onward endpoint --stream-shards 3`: each table's DynamoDB stream has three open shards, as a table of
    three partitions has on AWS (issue 12); without the flag it is one."""
    with onward_infra.endpoint.EndpointProcess("--stream-shards", "3") as emulator:
        environment = emulator.environment
        options = {"endpoint_url": emulator.url, "region_name": environment["AWS_DEFAULT_REGION"],
                   "aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
        table = boto3.client("dynamodb", **options).describe_table(TableName=environment["OUTBOX_TABLE"])
        shards = boto3.client("dynamodbstreams", **options).describe_stream(
            StreamArn=table["Table"]["LatestStreamArn"])["StreamDescription"]["Shards"]
        assert len(shards) == 3 and all("EndingSequenceNumber" not in s["SequenceNumberRange"] for s in shards)


def test_exports_that_never_end_are_an_error_not_a_partial_environment():
    lines = ["# Onward embedded AWS endpoint on http://127.0.0.1:1\n", "export JOBS_TABLE=j\n"]
    with pytest.raises(RuntimeError, match="ended before it printed its exports"):
        onward_infra.endpoint.read_exports(iter(lines))
    ended = [*lines, onward_infra.endpoint.END_OF_EXPORTS + "\n"]
    assert onward_infra.endpoint.read_exports(iter(ended)) == {"JOBS_TABLE": "j"}


def test_worker_command_stops_on_ctrl_c_even_started_with_sigint_ignored(environment):
    """A shell starts a background job (and CI scripts their children) with SIGINT ignored, and the ignoring is
    inherited: without its own handler `onward worker` never saw the Ctrl-C it says stops it, and ran on."""
    ignoring = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                "os.execv(sys.executable, [sys.executable, '-m', 'onward.cli', *sys.argv[1:]])")  # kept by exec
    process = subprocess.Popen(
        [sys.executable, "-c", ignoring, "worker", "--module", "onward.runtime.demo_jobs", "--concurrency", "1"],
        env={**os.environ, **environment}, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and "workers running" in process.stdout.readline()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
