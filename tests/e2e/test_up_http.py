"""`onward up` as a person runs it, checked only from the outside: over HTTP with the tokens it prints, and
against the tables it names in the export lines it prints.

- The demo workload reaches its expected terminal states, the view's version equals the job row's version
  for every job, and each job's run history has one record per attempt with the outcome its type implies.
- `--endpoint-url` runs the same platform against another endpoint (here a separate `onward endpoint`
  process standing in for another emulator), creating the template's data resources there with --deploy.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections import Counter

import boto3
import pytest

from tests.e2e.test_cli import ONWARD, free_port, read_exports

pytestmark = pytest.mark.integration

# (tenant, type) -> expected terminal states, attempts and run outcomes, for the demo of onward/cli/main.py
EXPECTED = {
    ("acme", "demo.echo"): [("succeeded", ["succeeded"])],
    ("acme", "demo.sleep"): [("succeeded", ["succeeded"])],
    ("acme", "demo.flaky"): [("succeeded", ["failed", "succeeded"])],
    ("globex", "demo.fail"): [("dead", ["failed"]), ("dead", ["failed", "failed"])],
    ("globex", "demo.sleep"): [("cancelled", ["cancelled"])],
    ("initech", "demo.crash"): [("quarantined", ["lease_expired", "lease_expired"])],
    ("initech", "demo.echo"): [("succeeded", ["succeeded"])],
}


def get(url: str, token: str) -> dict:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def read_until(process: subprocess.Popen, marker: str, timeout_s: float) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if marker in line:
            return lines
    raise AssertionError(f"{marker!r} not printed within {timeout_s}s:\n{''.join(lines)}")


def test_the_demo_over_http_ends_as_expected_with_view_runs_and_job_rows_agreeing():
    http_port = free_port()
    process = subprocess.Popen([*ONWARD, "up", "--demo", "--port", str(free_port()), "--http-port", str(http_port)],
                               stdout=subprocess.PIPE, text=True)
    try:
        printed = "".join(read_until(process, "All demo jobs reached a terminal state", 180))
        tokens = dict(re.findall(r"tenant (\w+)\s+token (\S+)", printed))
        exports = dict(re.findall(r"export (\w+)=(\S+)", printed))
        assert set(tokens) == {"acme", "globex", "initech"}
        dynamodb = boto3.client("dynamodb", endpoint_url=exports["AWS_ENDPOINT_URL"],
                                region_name=exports["AWS_DEFAULT_REGION"],
                                aws_access_key_id=exports["AWS_ACCESS_KEY_ID"],
                                aws_secret_access_key=exports["AWS_SECRET_ACCESS_KEY"])
        base = f"http://127.0.0.1:{http_port}"
        seen: Counter[tuple[str, str]] = Counter()
        found: dict[tuple[str, str], list[tuple[str, list[str]]]] = {}
        for tenant, token in tokens.items():
            page = get(f"{base}/jobs?limit=100", token)
            assert page["view"]["view_lag_s"] is not None
            for job in page["jobs"]:
                key = (tenant, job["type"])
                seen[key] += 1
                runs = get(f"{base}/jobs/{job['job_id']}/runs", token)["runs"]
                assert [run["attempt"] for run in runs] == list(range(1, job["attempt"] + 1))
                found.setdefault(key, []).append((job["status"], [run["outcome"] for run in runs]))
                row = dynamodb.get_item(TableName=exports["JOBS_TABLE"],
                                        Key={"pk": {"S": f"JOB#{job['job_id']}"}, "sk": {"S": "JOB"}})["Item"]
                assert int(row["version"]["N"]) == job["version"], job  # the view shows the final version
                assert row["state"]["S"] == job["status"]
                assert job["freshness"]["as_of"] >= job["updated_at"]  # committed when or after decided
        assert {key: sorted(value) for key, value in found.items()} == {k: sorted(v) for k, v in EXPECTED.items()}
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0


def test_up_runs_against_another_endpoint_with_endpoint_url():
    port = free_port()
    emulator = subprocess.Popen([*ONWARD, "endpoint", "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        read_exports(emulator)
        # `onward endpoint` deployed stack "onward" there; --deploy creates a second one beside it
        command = [*ONWARD, "up", "--endpoint-url", f"http://127.0.0.1:{port}", "--stack", "second", "--deploy",
                   "--demo", "--exit-when-done", "--http-port", str(free_port())]
        environment = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}
        first = subprocess.run(command, capture_output=True, text=True, timeout=240, env=environment, check=False)
        assert first.returncode == 0, first.stderr
        assert f"Onward: http://127.0.0.1:{port}" in first.stdout
        assert "Created the data resources of template.yaml as stack second" in first.stdout
        assert re.search(r"export JOBS_TABLE=second-jobs$", first.stdout, re.MULTILINE)  # beside onward-jobs
        assert "All demo jobs reached a terminal state" in first.stdout
        missing = subprocess.run([*ONWARD, "up", "--endpoint-url", f"http://127.0.0.1:{port}", "--stack", "nope",
                                  "--http-port", str(free_port())], capture_output=True, text=True, timeout=60,
                                 env=environment, check=False)
        assert missing.returncode != 0 and "cannot read stack 'nope'" in missing.stderr
    finally:
        emulator.send_signal(signal.SIGINT)
        emulator.wait(timeout=30)
