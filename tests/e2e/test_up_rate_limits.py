"""Rate limits on `onward up` as a person runs it, over HTTP only (issue 37): a limit PUT at /rate-limits/{key},
a burst of jobs naming the key; their attempts start never faster than the limit (a burst of `limit`, then one
per period / limit); a waiting job's explain says `rate_limited` until its
reserved moment; GET, list and DELETE answer as documented, and a bad key or limit is a 422 naming the field.

Without the bucket taken in the claim's transaction (onward.store.rate_limits) the burst starts as fast as the
workers take it; without the reservation the claims would keep meeting jobs with no token and start them late."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from datetime import datetime
from typing import Any

import pytest

from tests.e2e.test_cli import ONWARD, free_port
from tests.e2e.test_up_http import read_until

pytestmark = pytest.mark.integration

LIMIT, PERIOD_S, JOBS = 10, 1.0, 80


def call(url: str, token: str, body: Any = None, method: str | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method or ("GET" if body is None else "POST"),
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _ms(moment: str) -> float:
    return datetime.fromisoformat(moment).timestamp() * 1000


def test_a_burst_of_rate_limited_jobs_starts_at_the_limit_over_http_on_onward_up() -> None:
    http_port = free_port()
    process = subprocess.Popen([*ONWARD, "up", "--port", str(free_port()), "--http-port", str(http_port),
                                "--workers", "4", "--token", "acme=acme-rate-secret"], stdout=subprocess.PIPE,
                               text=True)
    try:
        printed = "".join(read_until(process, "Serving; Ctrl-C stops everything.", 180))
        token = dict(re.findall(r"tenant (\w+)\s+token (\S+)", printed))["acme"]
        base = f"http://127.0.0.1:{http_port}"
        status, limit = call(f"{base}/rate-limits/burst", token, {"limit": LIMIT, "period_s": PERIOD_S}, "PUT")
        assert status == 200 and (limit["key"], limit["limit"], limit["period_s"]) == ("burst", LIMIT, PERIOD_S)
        assert call(f"{base}/rate-limits/burst", token) == (200, limit)
        assert call(f"{base}/rate-limits", token)[1]["rate_limits"] == [limit]
        bad = call(f"{base}/rate-limits/burst", token, {"limit": 0, "period_s": 1}, "PUT")
        assert bad[0] == 422 and bad[1]["errors"][0]["loc"][-1] == "limit"
        assert call(f"{base}/rate-limits/type:Not-A-Type", token, {"limit": 1, "period_s": 1}, "PUT")[0] == 422
        reserved = call(f"{base}/jobs", token, {"type": "demo.echo", "rate_limit_key": "tenant"})
        assert reserved[0] == 422 and reserved[1]["errors"][0]["loc"][-1] == "rate_limit_key"

        batch = [{"type": "demo.echo", "params": {"n": n}, "rate_limit_key": "burst"} for n in range(JOBS)]
        ids = [result["job_id"] for chunk in (batch[:40], batch[40:])
               for result in call(f"{base}/jobs/batch", token, {"jobs": chunk})[1]["results"]]
        assert len(ids) == JOBS
        explained = []
        deadline = time.monotonic() + 30
        while not explained and time.monotonic() < deadline:  # a job of the burst waiting for its token
            for job_id in ids[-5:]:
                answer = call(f"{base}/jobs/{job_id}/explain", token)[1]
                if answer["reason"] == "rate_limited":
                    explained.append(answer)
            time.sleep(0.2)
        assert explained, "no job of the burst was explained as rate_limited"
        assert explained[0]["until"] is not None and "rate limited until" in explained[0]["detail"]

        starts: list[float] = []
        deadline = time.monotonic() + 120
        for job_id in ids:
            while True:
                runs = call(f"{base}/jobs/{job_id}/runs", token)[1]["runs"]
                if runs:
                    starts.append(_ms(runs[0]["claimed_at"]) if isinstance(runs[0]["claimed_at"], str)
                                  else float(runs[0]["claimed_at"]))
                    break
                assert time.monotonic() < deadline, f"job {job_id} never started"
                time.sleep(0.2)
        starts.sort()
        interval_ms = PERIOD_S * 1000 / LIMIT
        first = starts[0]
        # never over: by any start, at most LIMIT + (time since the first start) / interval have started
        assert all(count <= LIMIT + int((at - first) / interval_ms) + 1 for count, at in enumerate(starts, 1))
        # the run takes at least the time its tokens take (the burst, then one per interval): never faster than
        # the rate. How close to it the starts keep is the bench's figure (bench.rate_limits: within 5%, on a
        # simulated clock); here a loaded machine's workers may start the last jobs late, which no limit causes.
        expected_ms = (JOBS - LIMIT) * interval_ms
        assert expected_ms * 0.95 <= starts[-1] - first <= expected_ms * 2, (starts[-1] - first, expected_ms)
        assert call(f"{base}/rate-limits/burst", token, method="DELETE")[0] == 204
        assert call(f"{base}/rate-limits/burst", token)[0] == 404
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
