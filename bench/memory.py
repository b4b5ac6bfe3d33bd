"""Memory of a long-running local stack under constant load, with short local retention.

    .venv/bin/python -m bench.memory [--minutes 30] [--rate 2] [--retention-scale S] [--json]

Runs the embedded endpoint in a process of its own (`onward endpoint --retention-scale S`, through
infra/onward_infra/endpoint.EndpointProcess) and the platform in another (`onward up --endpoint-url ...`: workers,
reaper,
heartbeats, relay and projector pollers, HTTP API), submits demo.echo jobs over HTTP at a constant `--rate`,
and samples each process's resident memory (VmRSS) at a third, two thirds and all of `--minutes` (minutes
10, 20 and 30 by default). Prints:

- `rss_mb`: by process ("endpoint", "platform"), by minute;
- `growth_pct`: from the first sample to the last, by process (target: at most 10% once retention is
  reached; the retention scale is chosen so that the longest period, the 7-day TTL of the outbox and, here,
  of the jobs (the platform runs with ONWARD_JOB_RETENTION_DAYS=7), has passed by the first sample);
- `rss_mb_per_1000_jobs_retained`: by process, its RSS at the end minus its RSS before the first job, per
  1,000 jobs it holds at the end (`jobs_retained`: job rows in the jobs table): an upper bound of what each
  job kept costs, since all growth is charged to the jobs;
- `retention`: what the endpoint deleted and trimmed, and what it holds now (GET /_onward/retention), and
  `held` by minute;
- `last_minute_jobs_visible_succeeded`: of the jobs submitted in the last minute (well within retention),
  how many the API shows as succeeded at the end (the pipeline kept up).

Times and sizes come from a shared machine: read growth and ratios, not absolute values.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.e2e import submit_echo
from onward_infra.endpoint import EndpointProcess

ROOT = Path(__file__).resolve().parent.parent

TOKEN = "bench-memory-secret"
DYNAMODB_STREAM_RETENTION_S = 24 * 3600
OUTBOX_TTL_S = 7 * 24 * 3600  # ONWARD_OUTBOX_RETENTION_DAYS' default
JOB_RETENTION_DAYS = 7  # the platform's ONWARD_JOB_RETENTION_DAYS here: a finished job lives as long as its events
HEARTBEAT_TTL_S = 3600
MAX_SCALE = 0.0005  # at most: streams 43 s, the outbox's TTL 5 minutes
TARGET_GROWTH_PCT = 10.0
STATS_PATH = "/_onward/retention"  # onward_infra.moto_fixes.retention.STATS_PATH (not imported: it loads moto here)


def default_scale(minutes: float) -> float:
    """Short enough that the outbox's 7-day TTL has passed (with a margin) by the first sample."""
    return max(1e-5, min(MAX_SCALE, minutes * 60 / 3 * 0.8 / OUTBOX_TTL_S))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


class Platform:
    """`onward up --endpoint-url URL` in a child process; its output drained by a thread (its logs would
    otherwise fill the pipe and stop it)."""

    def __init__(self, environment: dict[str, str], workers: int) -> None:
        self._command = [sys.executable, "-m", "onward.cli", "up", "--endpoint-url", environment["AWS_ENDPOINT_URL"],
                         "--stack", "onward", "--http-port", "0", "--token", f"bench={TOKEN}",
                         "--workers", str(workers)]
        self._environment = {**os.environ, **environment, "POWERTOOLS_METRICS_DISABLED": "true",
                             "ONWARD_JOB_RETENTION_DAYS": str(JOB_RETENTION_DAYS)}
        self._process: subprocess.Popen[str] | None = None
        self.tail: deque[str] = deque(maxlen=50)
        self.url = ""

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def start(self) -> None:
        self._process = subprocess.Popen(self._command, cwd=ROOT, env=self._environment, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, text=True)
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self.tail.append(line)
            if line.startswith("HTTP API and status page: "):
                self.url = line.split()[5].rstrip("/")
            if line.startswith("Serving;"):
                break
        if not self.url:
            self.stop()
            raise RuntimeError("`onward up` did not start:\n" + "".join(self.tail))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            self.tail.append(line)

    def stop(self) -> None:
        if self._process is None or self._process.poll() is not None:
            return
        self._process.send_signal(signal.SIGINT)
        try:
            self._process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


@contextmanager
def running(scale: float, workers: int) -> Iterator[tuple[EndpointProcess, Platform]]:
    with EndpointProcess("--retention-scale", repr(scale)) as endpoint:
        platform = Platform(endpoint.environment, workers)
        platform.start()
        try:
            yield endpoint, platform
        finally:
            platform.stop()


def _status(base: str, job_id: str) -> str:
    request = urllib.request.Request(f"{base}/jobs/{job_id}", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        status: str = json.loads(response.read())["status"]
        return status


def _stats(endpoint: EndpointProcess) -> dict[str, Any]:
    with urllib.request.urlopen(endpoint.url + STATS_PATH, timeout=30) as response:
        stats: dict[str, Any] = json.loads(response.read())
        return stats


def _jobs_held(endpoint: EndpointProcess) -> int:
    """Job rows in the jobs table (not their runs, results or idempotency items)."""
    import boto3

    environment = endpoint.environment
    dynamodb = boto3.client("dynamodb", endpoint_url=endpoint.url, region_name=environment["AWS_DEFAULT_REGION"],
                            aws_access_key_id=environment["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=environment["AWS_SECRET_ACCESS_KEY"])
    count = 0
    for page in dynamodb.get_paginator("scan").paginate(
            TableName=environment["JOBS_TABLE"], Select="COUNT", FilterExpression="sk = :job",
            ExpressionAttributeValues={":job": {"S": "JOB"}}):
        count += page["Count"]
    return count


def _minute(seconds: float) -> str:
    return f"{seconds / 60:.4g}"


def run(minutes: float = 30.0, rate: float = 2.0, scale: float | None = None, workers: int = 4,
        progress: Any = None) -> dict[str, Any]:
    say = progress or (lambda line: None)
    scale = default_scale(minutes) if scale is None else scale
    at_s = [minutes * 60 * k / 3 for k in (1, 2, 3)]
    rss: dict[str, dict[str, float]] = {"endpoint": {}, "platform": {}}
    jobs_at: dict[str, int] = {}
    held: dict[str, Any] = {}
    with running(scale, workers) as (endpoint, platform):
        say(f"endpoint pid {endpoint.pid}, platform pid {platform.pid} on {platform.url}; retention scale {scale:g}")
        at_start = {"endpoint": rss_mb(endpoint.pid), "platform": rss_mb(platform.pid)}
        started = time.monotonic()
        submitted = 0
        submitted_at: list[tuple[float, str]] = []
        for sample_s in at_s:
            while True:
                due = started + submitted / rate
                now = time.monotonic()
                if due > started + sample_s:
                    break
                if due > now:
                    time.sleep(due - now)
                job_id = submit_echo(platform.url, TOKEN, submitted, "memory", timeout_s=60)
                submitted_at.append((time.monotonic(), job_id))
                submitted += 1
            time.sleep(max(0.0, started + sample_s - time.monotonic()))
            key = _minute(sample_s)
            rss["endpoint"][key] = round(rss_mb(endpoint.pid), 1)
            rss["platform"][key] = round(rss_mb(platform.pid), 1)
            jobs_at[key] = submitted
            held[key] = _stats(endpoint)["held"]
            say(f"  minute {key}: {submitted} jobs, endpoint {rss['endpoint'][key]} MB, "
                f"platform {rss['platform'][key]} MB, held {held[key]}")
        retention = _stats(endpoint)
        jobs_retained = _jobs_held(endpoint)
        time.sleep(min(10.0, max(2.0, 20 * scale * 60)))  # the last jobs through the pipeline
        last_minute = [job_id for at, job_id in submitted_at if at >= started + at_s[-1] - 60]
        visible = sum(_status(platform.url, job_id) == "succeeded" for job_id in last_minute)
    first, last = _minute(at_s[0]), _minute(at_s[-1])
    growth = {name: round((by[last] - by[first]) / by[first] * 100, 1) for name, by in rss.items()}
    per_1000 = {name: round((by[last] - at_start[name]) / jobs_retained * 1000, 2) if jobs_retained else None
                for name, by in rss.items()}
    return {
        "minutes": minutes,
        "rate_per_s": rate,
        "retention_scale": scale,
        "retention_s": {"dynamodb_stream": round(DYNAMODB_STREAM_RETENTION_S * scale, 2),
                        "kinesis": round(DYNAMODB_STREAM_RETENTION_S * scale, 2),  # the stack's 24 h
                        "outbox_ttl": round(OUTBOX_TTL_S * scale, 2),
                        "job_ttl": round(JOB_RETENTION_DAYS * 86400 * scale, 2),
                        "heartbeat_ttl": round(HEARTBEAT_TTL_S * scale, 2)},
        "rss_mb_before_the_first_job": {name: round(mb, 1) for name, mb in at_start.items()},
        "rss_mb": rss,
        "growth_pct": growth,
        "target_growth_pct": TARGET_GROWTH_PCT,
        "within_target": all(value <= TARGET_GROWTH_PCT for value in growth.values()),
        "jobs_submitted": jobs_at,
        "jobs_retained": jobs_retained,
        "rss_mb_per_1000_jobs_retained": per_1000,
        "held": held,
        "retention": {name: retention[name] for name in
                      ("sweeps", "ttl_deleted", "dynamodb_stream_records_trimmed", "kinesis_records_trimmed")},
        "last_minute_jobs": len(last_minute),
        "last_minute_jobs_visible_succeeded": visible,
    }


def report(r: dict[str, Any]) -> str:
    lines = [f"Memory: {r['minutes']} min at {r['rate_per_s']} jobs/s, retention scale {r['retention_scale']:g} "
             f"(streams {r['retention_s']['dynamodb_stream']} s, outbox TTL {r['retention_s']['outbox_ttl']} s)"]
    for name in ("endpoint", "platform"):
        samples = "  ".join(f"min {m}: {mb} MB" for m, mb in r["rss_mb"][name].items())
        lines.append(f"  {name:9} {samples}  growth {r['growth_pct'][name]}%  "
                     f"{r['rss_mb_per_1000_jobs_retained'][name]} MB per 1,000 jobs retained")
    lines.append(f"  deleted/trimmed {r['retention']}; {r['jobs_retained']} jobs retained at the end; of the "
                 f"last minute's {r['last_minute_jobs']} jobs {r['last_minute_jobs_visible_succeeded']} visible as "
                 "succeeded")
    lines.append(f"  growth within {r['target_growth_pct']}%: {r['within_target']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="length of the run (samples at 1/3, 2/3, 3/3)")
    parser.add_argument("--rate", type=float, default=2.0, help="jobs submitted per second")
    parser.add_argument("--retention-scale", type=float, help="the endpoint's --retention-scale (default: short "
                        "enough for the outbox TTL to pass by the first sample, at most 0.0005)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.rate <= 0:
        parser.error("--minutes and --rate must be positive")

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    results = run(args.minutes, args.rate, args.retention_scale, args.workers, say)
    print(json.dumps(results, sort_keys=True) if args.json else report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
