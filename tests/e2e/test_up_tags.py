"""Tags on `onward up` as a person runs it, over HTTP only, with the tokens it prints: jobs created with tags (one
at a time and in a batch) run to their end, and are then found by tag (GET /jobs?tag=, paged with cursors, and
GET /jobs/counts?tag=) among jobs without it; a bad tag is a 422 naming `tags`, and creates nothing.

Without the local projector's tag entries (onward/pipeline/tag_index.py) nothing is found by its tag; without the
`by_tag` index in template.yaml, which `onward up` deploys, every tag listing fails (the Query names an index the
table does not have)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.e2e.test_cli import ONWARD, free_port
from tests.e2e.test_up_http import read_until

pytestmark = pytest.mark.integration


def call(url: str, token: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if body is None else "POST",
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_jobs_created_with_tags_on_onward_up_are_listed_and_counted_by_tag_over_http() -> None:
    http_port = free_port()
    process = subprocess.Popen([*ONWARD, "up", "--port", str(free_port()), "--http-port", str(http_port),
                                "--token", "acme=acme-tags-secret"], stdout=subprocess.PIPE, text=True)
    try:
        printed = "".join(read_until(process, "Serving; Ctrl-C stops everything.", 180))
        token = dict(re.findall(r"tenant (\w+)\s+token (\S+)", printed))["acme"]
        base = f"http://127.0.0.1:{http_port}"
        tagged = [call(f"{base}/jobs", token, {"type": "demo.echo", "tags": {"env": "prod", "n": str(n)}})[1]["job_id"]
                  for n in range(5)]
        status, batch = call(f"{base}/jobs/batch", token, {"jobs": [
            {"type": "demo.echo", "tags": {"env": "prod"}}, {"type": "demo.echo", "tags": {"env": "dev"}}]})
        assert status == 200 and [result["status"] for result in batch["results"]] == [202, 202]
        tagged.append(batch["results"][0]["job_id"])
        untagged = call(f"{base}/jobs", token, {"type": "demo.echo"})[1]["job_id"]
        refused = call(f"{base}/jobs", token, {"type": "demo.echo", "tags": {"env": "a b"}})
        assert refused[0] == 422 and refused[1]["errors"][0]["loc"][:2] == ["tags", "env"]

        deadline = time.monotonic() + 60
        while True:  # until every tagged job ran to its end and the view shows it
            counts = call(f"{base}/jobs/counts?tag=env:prod", token)[1]
            if counts["counts"]["succeeded"] == len(tagged):
                break
            assert time.monotonic() < deadline, counts
            time.sleep(0.5)
        assert sum(counts["counts"].values()) == len(tagged) and counts["complete"] is True

        shown, cursor = [], None
        while True:
            page = call(f"{base}/jobs?tag=env:prod&limit=2" + (f"&cursor={cursor}" if cursor else ""), token)[1]
            shown += [job["job_id"] for job in page["jobs"]]
            assert all(job["tags"]["env"] == "prod" for job in page["jobs"])
            cursor = page["cursor"]
            if cursor is None:
                break
        assert sorted(shown) == sorted(tagged) and len(shown) == len(tagged) and untagged not in shown
        assert [job["job_id"] for job in call(f"{base}/jobs?tag=n:3", token)[1]["jobs"]] == [tagged[3]]
        everything = call(f"{base}/jobs?limit=100", token)[1]["jobs"]
        assert len(everything) == len(tagged) + 2  # the refused job was never stored
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
