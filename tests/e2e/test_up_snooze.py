"""Snooze and retry policies on `onward up` (issue 37), checked from the outside over HTTP as a person would:
its workers publish their types' policies (GET /job-types), a `demo.snooze` job snoozes without spending an
attempt and comes back no earlier than asked, and a job created without max_attempts gets its type's."""

from __future__ import annotations

import re
import signal
import subprocess
import time

import pytest

from onward.domain.clock import parse_instant
from tests.e2e.test_cli import ONWARD, free_port
from tests.e2e.test_up_http import get, read_until
from tests.e2e.test_up_progress import post

pytestmark = pytest.mark.integration

SNOOZE_S = 2


def test_a_demo_snooze_job_snoozes_not_charged_under_its_declared_policy():
    """Without the pool's declaration GET /job-types would not list demo.snooze and the job would get the
    platform's 3 attempts; without Snooze crossing the child's pipe its first attempt would be a failure; and
    the snoozed job must come back no earlier than its snooze."""
    http_port = free_port()
    process = subprocess.Popen([*ONWARD, "up", "--port", str(free_port()), "--http-port", str(http_port),
                                "--token", "acme=snooze-secret"], stdout=subprocess.PIPE, text=True)
    try:
        read_until(process, "Serving; Ctrl-C stops everything.", 180)
        base, token = f"http://127.0.0.1:{http_port}", "snooze-secret"
        declared = {item["type"]: item for item in get(f"{base}/job-types", token)["types"]}
        assert declared["demo.snooze"]["retry"]["max_attempts"] == 2
        assert declared["demo.snooze"]["retry"]["max_snoozes"] == 10
        assert re.fullmatch(r".+:\d+", declared["demo.snooze"]["declared_by"])

        job_id = post(f"{base}/jobs", token, {"type": "demo.snooze", "params": {"seconds": SNOOZE_S}})["job_id"]
        assert get(f"{base}/jobs/{job_id}/params", token)["max_attempts"] == 2
        deadline = time.monotonic() + 90
        while not (answer := get(f"{base}/jobs/{job_id}", token)).get("terminal"):
            assert time.monotonic() < deadline, answer
            time.sleep(0.25)

        assert answer["status"] == "succeeded"
        runs = get(f"{base}/jobs/{job_id}/runs", token)["runs"]
        assert [run["outcome"] for run in runs] == ["snoozed", "succeeded"]
        explained = get(f"{base}/jobs/{job_id}/explain", token)
        assert (explained["retry_policy"]["snoozes"], explained["retry_policy"]["attempts_used"]) == (1, 1)
        assert _ms(runs[1]["claimed_at"]) - _ms(runs[0]["finished_at"]) >= SNOOZE_S * 1000
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0


def _ms(moment: str | int) -> int:
    return moment if isinstance(moment, int) else parse_instant(moment)
