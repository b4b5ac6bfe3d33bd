"""Progress on `onward up` (issue 38), checked from the outside over HTTP as a person would: a `demo.progress`
job's status shows its running attempt's progress while it runs, rising, and its final status shows none."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import urllib.request

import pytest

from tests.e2e.test_cli import ONWARD, free_port
from tests.e2e.test_up_http import get, read_until

pytestmark = pytest.mark.integration


def post(url: str, token: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json", "Idempotency-Key": "progress-1"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_a_demo_progress_job_shows_rising_progress_while_running_and_none_once_final():
    """Without the progress path (context -> child pipe -> reporter -> store -> outbox -> relay -> projector ->
    view -> API) no running answer would carry progress; without the completion's whole-row write the final
    status would still show the last update."""
    http_port = free_port()
    process = subprocess.Popen([*ONWARD, "up", "--port", str(free_port()), "--http-port", str(http_port),
                                "--token", "acme=progress-secret"], stdout=subprocess.PIPE, text=True)
    try:
        printed = "".join(read_until(process, "Serving; Ctrl-C stops everything.", 180))
        token = dict(re.findall(r"tenant (\w+)\s+token (\S+)", printed))["acme"]
        assert token == "progress-secret"
        base = f"http://127.0.0.1:{http_port}"
        job_id = post(f"{base}/jobs", token, {"type": "demo.progress", "params": {"steps": 8, "step_s": 1}})["job_id"]

        answers: list[dict] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            answer = get(f"{base}/jobs/{job_id}", token)
            answers.append(answer)
            if answer.get("terminal"):
                break
            time.sleep(0.25)

        running = [answer for answer in answers if answer.get("status") == "running" and answer["progress"]]
        assert len(running) >= 2, answers
        fractions = [answer["progress"]["fraction"] for answer in running]
        assert fractions == sorted(fractions) and len(set(fractions)) >= 3, fractions  # update after update
        assert all(answer["progress"]["attempt"] == answer["attempt"] == 1 for answer in running)
        assert all(answer["progress"]["message"].startswith(("starting", "step ")) for answer in running)
        final = answers[-1]
        assert (final["status"], final["progress"]) == ("succeeded", None)
        runs = get(f"{base}/jobs/{job_id}/runs", token)["runs"]
        assert runs[0]["progress"]["fraction"] >= fractions[-1]  # the run record keeps the last one written
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
