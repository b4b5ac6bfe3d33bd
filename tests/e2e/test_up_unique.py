"""Unique jobs (issue 37) on `onward up` as a person runs it, over HTTP only with the token it prints, and through
onward.client: a second create with a held `unique.key` answers the holder (200, `duplicate_of_unique`), `reject`
is a 409 naming the holder, `replace` cancels a waiting holder, a bad window is a 422 naming `unique.window_s`,
eight concurrent creates of one key make one job, and a key held "until finished" is free once its job ran.

Without the key item's conditional put in the create's transaction (onward/store/dynamo/unique_keys.py), the
concurrent creates would make several jobs; without `unique` on NewJob, every create here is a 422."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from onward.client import Client
from tests.e2e.test_cli import ONWARD, free_port
from tests.e2e.test_up_http import read_until
from tests.e2e.test_up_tags import call

pytestmark = pytest.mark.integration

LATER = 3600  # delay_s that keeps a job waiting (queued) for the whole test


def wait_for_status(base: str, token: str, job_id: str, wanted: str, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        status, body = call(f"{base}/jobs/{job_id}", token)
        if status == 200 and body.get("status") == wanted:
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.3)


def test_unique_keys_on_onward_up_over_http_and_the_client() -> None:
    http_port = free_port()
    process = subprocess.Popen([*ONWARD, "up", "--port", str(free_port()), "--http-port", str(http_port),
                                "--token", "acme=acme-unique-secret"], stdout=subprocess.PIPE, text=True)
    try:
        printed = "".join(read_until(process, "Serving; Ctrl-C stops everything.", 180))
        token = dict(re.findall(r"tenant (\w+)\s+token (\S+)", printed))["acme"]
        base = f"http://127.0.0.1:{http_port}"
        windowed = {"type": "demo.echo", "delay_s": LATER, "unique": {"key": "report:42", "window_s": 600}}

        status, first = call(f"{base}/jobs", token, windowed)
        assert status == 202 and "duplicate_of_unique" not in first
        status, again = call(f"{base}/jobs", token, {**windowed, "params": {"other": 1}})
        assert (status, again["job_id"], again["duplicate_of_unique"]) == (200, first["job_id"], True)

        status, refused = call(f"{base}/jobs", token, {**windowed, "unique": {**windowed["unique"],
                                                                              "on_conflict": "reject"}})
        assert status == 409 and refused["type"].endswith("/unique-key-held")
        assert refused["existing_job_id"] == first["job_id"] and "unique.key" in refused["detail"]

        status, replacing = call(f"{base}/jobs", token, {**windowed, "unique": {**windowed["unique"],
                                                                                "on_conflict": "replace"}})
        assert status == 202 and replacing["replaced_job_id"] == first["job_id"]
        wait_for_status(base, token, first["job_id"], "cancelled")

        status, invalid = call(f"{base}/jobs", token, {**windowed, "unique": {"key": "k", "window_s": 0}})
        assert status == 422 and invalid["errors"][0]["loc"][:2] == ["unique", "window_s"]

        racing = {"type": "demo.echo", "delay_s": LATER, "unique": {"key": "race"}}
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: call(f"{base}/jobs", token, racing), range(8)))
        assert sorted(status for status, _ in answers) == [200] * 7 + [202]
        assert len({body["job_id"] for _, body in answers}) == 1

        with Client(base, token) as onward:
            held = onward.submit("demo.echo", {"n": 1}, unique={"key": "until-done"})
            duplicate = onward.submit("demo.echo", {"n": 2}, unique={"key": "until-done"})
            assert held.created and not duplicate.created and duplicate.duplicate_of_unique
            assert duplicate.job_id == held.job_id
            assert onward.wait(held.job_id, timeout_s=60).status == "succeeded"
            after = onward.submit("demo.echo", {"n": 3}, unique={"key": "until-done"})
            assert after.created and after.job_id != held.job_id and not after.duplicate_of_unique
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
