"""Concurrency keys (issue 37, item 2) on `onward up` as a person runs it, over HTTP only with the token it prints,
and through onward.client: four sleeps of one key with limit 1 run one at a time (their runs never overlap) while
the tenant's other jobs run beside them, a job waiting on its key is explained as `concurrency_limited`
("1 of 1 running ..."), `cancel_newest` is a 409 while the key is at its limit, and a bad limit is a 422 naming
`concurrency.limit`.

Without the key's condition in the claim's transaction (onward/store/dynamo/concurrency_keys.py), several sleeps
would run at once (`onward up` runs several workers); without the hold, no job would be explained as
`concurrency_limited`; without `concurrency` on NewJob, every create here is a 422."""

from __future__ import annotations

import itertools
import re
import signal
import subprocess
import time
from typing import Any

import pytest

from onward.client import Client, Conflict
from tests.e2e.test_cli import ONWARD, free_port
from tests.e2e.test_up_http import read_until
from tests.e2e.test_up_tags import call
from tests.e2e.test_up_unique import wait_for_status

pytestmark = pytest.mark.integration


def runs_of(base: str, token: str, job_id: str) -> list[dict[str, Any]]:
    status, body = call(f"{base}/jobs/{job_id}/runs", token)
    assert status == 200, body
    return list(body["runs"])


def test_concurrency_keys_on_onward_up_over_http_and_the_client() -> None:
    http_port = free_port()
    process = subprocess.Popen([*ONWARD, "up", "--port", str(free_port()), "--http-port", str(http_port),
                                "--token", "acme=acme-conc-secret"], stdout=subprocess.PIPE, text=True)
    try:
        printed = "".join(read_until(process, "Serving; Ctrl-C stops everything.", 180))
        token = dict(re.findall(r"tenant (\w+)\s+token (\S+)", printed))["acme"]
        base = f"http://127.0.0.1:{http_port}"

        status, invalid = call(f"{base}/jobs", token, {"type": "demo.echo", "concurrency": {"key": "k", "limit": 0}})
        assert status == 422 and invalid["errors"][0]["loc"][:2] == ["concurrency", "limit"]

        keyed = {"type": "demo.sleep", "params": {"seconds": 1.5}, "concurrency": {"key": "customer-42", "limit": 1}}
        sleeps = []
        for _ in range(4):
            status, body = call(f"{base}/jobs", token, keyed)
            assert status == 202, body
            sleeps.append(body["job_id"])
        status, echo = call(f"{base}/jobs", token, {"type": "demo.echo", "params": {"n": 1}})
        assert status == 202

        reasons: set[str] = set()
        deadline = time.monotonic() + 60
        while "concurrency_limited" not in reasons and time.monotonic() < deadline:
            for job_id in sleeps:
                status, explained = call(f"{base}/jobs/{job_id}/explain", token)
                if status == 200 and explained["reason"] == "concurrency_limited":
                    assert re.search(r"1 of 1 running for concurrency key 'customer-42'", explained["detail"])
                reasons.add(explained.get("reason", ""))
            time.sleep(0.2)
        assert "concurrency_limited" in reasons, reasons

        status, refused = call(f"{base}/jobs", token, {**keyed, "concurrency": {**keyed["concurrency"],
                                                                               "on_overflow": "cancel_newest"}})
        assert status == 409 and refused["type"].endswith("/concurrency-limit-reached"), refused

        assert wait_for_status(base, token, echo["job_id"], "succeeded")
        for job_id in sleeps:
            wait_for_status(base, token, job_id, "succeeded", timeout_s=120)
        intervals = sorted((run["claimed_at"], run["finished_at"]) for job_id in sleeps
                           for run in runs_of(base, token, job_id))
        for (_, ended), (started, _) in itertools.pairwise(intervals):
            assert ended <= started, f"two attempts of the key overlapped: {intervals}"

        with Client(base, token) as onward:
            first = onward.submit("demo.echo", {"n": 2}, concurrency={"key": "by-client", "limit": 1})
            assert onward.wait(first.job_id, timeout_s=60).status == "succeeded"
            busy = onward.submit("demo.sleep", {"seconds": 30}, concurrency={"key": "busy", "limit": 1})
            wait_for_status(base, token, busy.job_id, "running")
            with pytest.raises(Conflict):
                onward.submit("demo.echo", {}, concurrency={"key": "busy", "limit": 1, "on_overflow": "cancel_newest"})
            onward.cancel(busy.job_id)
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
