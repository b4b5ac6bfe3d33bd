"""End to end on the embedded stack: N jobs submitted over HTTP until all are visible as succeeded.

    .venv/bin/python -m bench.e2e [--jobs N] [--workers W] [--rate R] [--json]

The platform runs in this process (infra/onward_infra/platform.py: the HTTP gateway, reaper, heartbeats, relay and
projector pollers), with the API's handler in 4 execution environments and the worker pool running demo.echo
in a process of its own (as the ECS service runs it), against the embedded endpoint in a process of its own,
as `onward up` runs it (`onward endpoint --meter`: infra/onward_infra/endpoint.EndpointProcess), whose Meter
(infra/onward_infra/metering.py) sees every AWS request the platform makes and is read over HTTP (RemoteMeter). The
bench's own polling of the view (by key, the jobs not yet seen succeeded) is not metered. Prints:

- jobs/s from the first submit until every job shows `succeeded` in the status view, for a burst of N
  jobs and then for N jobs submitted at half the burst's rate (or once, at --rate), with when the last job's
  final transition committed (`last_commit_s`: the rest of the run is the pipeline catching up);
- commit-to-visible lag p50/p99: for each job's final status, the view's projected_at minus the
  transition's commit time. In a burst the embedded endpoint (one request at a time) is saturated and the
  lag is mostly queueing; the paced run shows the lag of a load the stack sustains;
- requests per job by service and operation, and transactions per job against the floor of 3 (create,
  claim, complete), as ratios;
- DynamoDB write units per job, computed from the items' real sizes by DynamoDB's billing rules (2 per KB
  per item in a transaction, 1 otherwise, global secondary index writes included), split into the job's
  three transactions and everything else;
- Kinesis records and bytes per job.

Idle costs (workers' empty claims, reaper scans, heartbeats, stream polls) are real costs and are counted
in; with more jobs per second they weigh less per job. Times come from a shared machine: read the ratios
and counts, not the absolute values.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any

os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

from botocore.config import Config

from bench.fairness import percentile
from onward.bootstrap import Deployment
from onward.domain.clock import epoch_ms, system_clock
from onward.pipeline.view import StatusViewReader
from onward.runtime.demo_jobs import registry
from onward.settings import Settings
from onward_infra.endpoint import EndpointProcess, client_for
from onward_infra.metering import OBSERVER_AGENT, RemoteMeter
from onward_infra.platform import LocalPlatform, PlatformOptions

JOBS = 300
POLL_KEYS = 100  # one BatchGetItem
POLL_EVERY_S = 0.25
FLOOR_TRANSACTIONS_PER_JOB = 3  # create, claim, complete
TOKEN = "bench-secret"
API_ENVIRONMENTS = 4  # as `onward up` runs the API handler (infra/onward_infra/environments.py)
# the workers in a process of their own, as on ECS (infra/onward_infra/worker_process.py)
WORKER_MODULE = "onward.runtime.demo_jobs"


class _KeptConnections(threading.local):
    """Each submitting thread's HTTP/1.1 connection per API address, kept alive between its requests (as an
    HTTP client library's session keeps them): a new connection per request cost the submitter and the
    gateway a TCP handshake and a thread each."""

    def __init__(self) -> None:
        self.by_address: dict[tuple[str, int], http.client.HTTPConnection] = {}

    def request(self, base: str, body: bytes, headers: dict[str, str], timeout_s: float) -> tuple[int, bytes]:
        """POST `body` to `base`/jobs: the answer's status and body. A kept connection the server closed
        meanwhile is replaced and the request sent again (safe: it carries an Idempotency-Key)."""
        split = urllib.parse.urlsplit(base)
        address = (split.hostname or "127.0.0.1", split.port or 80)
        try:
            return self._post(address, split.path, body, headers, timeout_s)
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            return self._post(address, split.path, body, headers, timeout_s)

    def _post(self, address: tuple[str, int], path: str, body: bytes, headers: dict[str, str],
              timeout_s: float) -> tuple[int, bytes]:
        """One POST on the kept connection to `address` (a new one when none is kept); a connection that
        fails is closed and forgotten."""
        connection = self.by_address.get(address)
        if connection is None:
            connection = self.by_address[address] = http.client.HTTPConnection(*address, timeout=timeout_s)
        try:
            connection.request("POST", f"{path.rstrip('/')}/jobs", body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        except OSError:  # (RemoteDisconnected is one)
            connection.close()
            del self.by_address[address]
            raise


_kept = _KeptConnections()


def submit_echo(base: str, token: str, number: int, key_prefix: str = "bench", timeout_s: float = 30.0) -> str:
    """POST one demo.echo job (`n`: number, Idempotency-Key `<key_prefix>-<number>`) to the API at `base`,
    on this thread's kept-alive connection; the new job's id."""
    status, answer = _kept.request(
        base, json.dumps({"type": "demo.echo", "params": {"n": number}}).encode(),
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
         "Idempotency-Key": f"{key_prefix}-{number}"}, timeout_s)
    if status not in (200, 202):
        raise RuntimeError(f"POST /jobs answered {status}: {answer[:200]!r}")
    job_id: str = json.loads(answer)["job_id"]
    return job_id


def _paced_submit(base: str, jobs: int, rate: float | None) -> list[str]:
    """Submit `jobs` over HTTP: all at once (8 connections) when `rate` is None, else one every 1/rate s."""
    started = time.perf_counter()

    def submit(number: int) -> str:
        if rate is not None:
            time.sleep(max(0.0, started + number / rate - time.perf_counter()))
        return submit_echo(base, TOKEN, number)

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(submit, range(jobs)))


def _succeeded_among(observer: Any, table: str, job_ids: list[str]) -> set[str]:
    """Which of these (at most 100) jobs the view shows succeeded: one consistent BatchGetItem projecting the
    key and the status only (a whole row costs the endpoint and this process about ten times as much to
    answer and parse, and the poll is the bench's, not the platform's)."""
    request: dict[str, Any] = {table: {"Keys": [{"job_id": {"S": job_id}} for job_id in job_ids],
                                       "ConsistentRead": True, "ProjectionExpression": "job_id, #status",
                                       "ExpressionAttributeNames": {"#status": "status"}}}
    succeeded: set[str] = set()
    while request:
        answer = observer.batch_get_item(RequestItems=request)
        succeeded.update(item["job_id"]["S"] for item in answer["Responses"].get(table, [])
                         if item["status"]["S"] == "succeeded")
        request = answer.get("UnprocessedKeys") or {}
    return succeeded


def _await_succeeded(observer: Any, table: str, job_ids: list[str], jobs: int, say: Any) -> None:
    """Wait until every job's view row reads succeeded. Each poll reads only the POLL_KEYS oldest jobs not yet
    seen succeeded, by key and their status only (one BatchGetItem): the embedded endpoint answers one
    request at a time, so a poll that scanned the growing view (as this bench did) took the endpoint's time
    from the platform it measures (a third of it at 800 jobs). A poll whose jobs all read succeeded is
    followed by the next at once, so a view that caught up is read to its end without waiting."""
    pending = list(job_ids)  # in the order submitted: the oldest are the likeliest to be done
    shown: set[str] = set()
    while pending:
        polled = pending[:POLL_KEYS]
        shown |= _succeeded_among(observer, table, polled)
        pending = [job_id for job_id in pending if job_id not in shown]
        if pending and any(job_id not in shown for job_id in polled):
            say(f"  {len(shown)}/{jobs} visible as succeeded")
            time.sleep(POLL_EVERY_S)


def run(jobs: int = JOBS, workers: int = 4, progress: Any = None, rate: float | None = None,
        billing: bool = True) -> dict[str, Any]:
    """One run: `jobs` submitted as a burst (rate None) or at `rate` jobs/s, until all are visible.
    `billing` False: the endpoint counts requests only (the units' keys then read 0), which leaves more of
    the endpoint's time to the platform (bench/peer.py)."""
    say = progress or (lambda line: None)
    with EndpointProcess("--meter", "billing" if billing else "requests") as endpoint:
        meter = RemoteMeter(endpoint.url)
        environment = {**endpoint.environment, "ONWARD_PARAMETER_VALIDATION": "false"}  # as `onward up`
        os.environ.update(environment)
        os.environ.update({"ONWARD_TOKENS": f"bench={TOKEN}", "ONWARD_JOB_TYPES": ",".join(registry.types)})
        settings = Settings.from_environment(environment)
        observer = client_for(endpoint.url, "dynamodb", Config(user_agent_extra=OBSERVER_AGENT))
        view = StatusViewReader(observer, settings.require("status_table"))
        options = PlatformOptions(workers=workers, lease_s=30.0, http_port=0, api_environments=API_ENVIRONMENTS,
                                  worker_module=WORKER_MODULE)
        with LocalPlatform(Deployment(settings), registry, options) as platform:
            meter.reset()
            started = time.perf_counter()
            started_ms = system_clock()
            job_ids = _paced_submit(platform.url, jobs, rate)
            submitted_s = time.perf_counter() - started
            say(f"submitted {jobs} jobs over HTTP in {submitted_s:.1f}s")
            _await_succeeded(observer, settings.require("status_table"), job_ids, jobs, say)
            elapsed_s = time.perf_counter() - started
            reading = meter.reset()
            shown = view.get_many(job_ids)  # whole rows, for the lags: read once the clock has stopped
    # When the last job's final transition committed: the workers' part of the run; the rest of
    # elapsed_s is the pipeline (stream, relay, Kinesis, projector) catching up.
    worked_s = (max(epoch_ms(v.occurred_at) for v in shown.values()) - started_ms) / 1000
    lags = sorted((epoch_ms(v.projected_at) - epoch_ms(v.occurred_at)) / 1000 for v in shown.values())
    requests = dict(sorted(reading.requests.items()))
    transactions = reading.requests.get("dynamodb.TransactWriteItems", 0)
    job_transaction_units = reading.write_units.get("dynamodb.TransactWriteItems", 0)
    total_units = reading.table_write_units + reading.index_write_units
    dynamodb_requests = sum(n for name, n in requests.items() if name.startswith("dynamodb."))
    return {
        "jobs": jobs,
        "workers": workers,
        "submitted_at_per_s": rate,
        "elapsed_s": round(elapsed_s, 2),
        "jobs_per_s": round(jobs / elapsed_s, 1),
        "last_commit_s": round(worked_s, 2),
        "lag_p50_s": round(percentile(lags, 0.50), 3),
        "lag_p99_s": round(percentile(lags, 0.99), 3),
        "requests_per_job": {name: round(n / jobs, 3) for name, n in requests.items()},
        "dynamodb_requests_per_job": round(dynamodb_requests / jobs, 2),
        "transactions_per_job": round(transactions / jobs, 3),
        "transactions_vs_floor": round(transactions / jobs / FLOOR_TRANSACTIONS_PER_JOB, 3),
        "cancelled_transactions": reading.cancelled_transactions,
        "failed_conditional_writes": reading.failed_conditional_writes,
        "write_units_per_job": round(total_units / jobs, 2),
        "write_units_per_job_table": round(reading.table_write_units / jobs, 2),
        "write_units_per_job_indexes": round(reading.index_write_units / jobs, 2),
        "write_units_per_job_in_transactions": round(job_transaction_units / jobs, 2),
        "write_units_per_job_other": round((total_units - job_transaction_units) / jobs, 2),
        "write_units_by_operation_per_job": {name: round(n / jobs, 3)
                                             for name, n in sorted(reading.write_units.items())},
        "kinesis_records_per_job": round(reading.kinesis_records / jobs, 3),
        "kinesis_bytes_per_job": round(reading.kinesis_bytes / jobs),
    }


def report(results: dict[str, Any]) -> str:
    pace = "as one burst" if results["submitted_at_per_s"] is None else f"at {results['submitted_at_per_s']} jobs/s"
    lines = [
        f"End to end: {results['jobs']} jobs over HTTP {pace}, {results['workers']} workers, "
        f"{results['elapsed_s']}s until all visible as succeeded",
        f"  throughput                 {results['jobs_per_s']} jobs/s (the last job committed at "
        f"{results['last_commit_s']}s)",
        f"  commit-to-visible lag      p50 {results['lag_p50_s']}s   p99 {results['lag_p99_s']}s",
        f"  transactions per job       {results['transactions_per_job']}  "
        f"({results['transactions_vs_floor']}x the floor of {FLOOR_TRANSACTIONS_PER_JOB}); "
        f"{results['cancelled_transactions']} cancelled, "
        f"{results['failed_conditional_writes']} failed conditional writes",
        f"  DynamoDB requests per job  {results['dynamodb_requests_per_job']}",
        f"  write units per job        {results['write_units_per_job']}  (table "
        f"{results['write_units_per_job_table']}, indexes {results['write_units_per_job_indexes']}; "
        f"job transactions {results['write_units_per_job_in_transactions']}, "
        f"other {results['write_units_per_job_other']})",
        f"  Kinesis per job            {results['kinesis_records_per_job']} records, "
        f"{results['kinesis_bytes_per_job']} bytes",
        "  requests per job by operation:",
    ]
    lines += [f"    {name:40} {value}" for name, value in results["requests_per_job"].items()]
    lines.append("  write units per job by operation:")
    lines += [f"    {name:40} {value}" for name, value in results["write_units_by_operation_per_job"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rate", type=float, help="only one run, submitting this many jobs/s")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the tables")
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if args.rate is not None:
        runs = [run(args.jobs, args.workers, say, rate=args.rate)]
    else:
        # A burst measures the most jobs/s (its lag is mostly queueing behind the burst); a second run at
        # half that rate measures the lag a sustainable load sees.
        burst = run(args.jobs, args.workers, say)
        runs = [burst, run(args.jobs, args.workers, say, rate=round(burst["jobs_per_s"] / 2, 1))]
    print(json.dumps(runs, sort_keys=True) if args.json else "\n\n".join(report(r) for r in runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
