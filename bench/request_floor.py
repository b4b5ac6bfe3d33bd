"""What one AWS request costs on the embedded stack, and the speed that cost alone allows.

    .venv/bin/python -m bench.request_floor [--requests 2000] [--json]

Against a fresh embedded endpoint in a process of its own (as `onward up` runs it), one thread sends the
cheapest requests the platform sends (a GetItem of a missing key, a 200-byte PutItem) through the local
stack's boto3 client, and measures the CPU each request costs: the client's (this process's CPU time; no
other thread is busy) and the endpoint's (its process's CPU time, from /proc). Their sum is the floor of a
request: every request the platform makes costs at least that, before the operation itself does anything.

`ceiling_jobs_per_s(requests_per_job)` is then the most jobs per second the machine's CPUs could run if
each job cost only its requests at that floor, every CPU busy and nothing else running: an upper bound no
change short of fewer or cheaper requests can pass. bench/peer.py prints it beside the measured speed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from onward_infra.endpoint import EndpointProcess

REQUESTS = 2000
WARM_UP = 100


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cost(endpoint_pid: int, send: Any, requests: int) -> dict[str, float]:
    for _ in range(WARM_UP):
        send()
    client_before, server_before = time.process_time(), process_cpu_s(endpoint_pid)
    for _ in range(requests):
        send()
    client_ms = 1000 * (time.process_time() - client_before) / requests
    server_ms = 1000 * (process_cpu_s(endpoint_pid) - server_before) / requests
    return {"client_ms": round(client_ms, 3), "endpoint_ms": round(server_ms, 3),
            "total_ms": round(client_ms + server_ms, 3)}


def measure(requests: int = REQUESTS) -> dict[str, Any]:
    """CPU per request, client and endpoint, for a missing-key GetItem and a small PutItem; `floor_ms` is
    the median of the two totals."""
    with EndpointProcess() as endpoint:
        dynamodb = endpoint.client("dynamodb")
        table = endpoint.environment["JOBS_TABLE"]  # the stack `onward endpoint` deployed
        key = {"pk": {"S": "request-floor"}, "sk": {"S": "missing"}}
        item = {"pk": {"S": "request-floor"}, "sk": {"S": "written"}, "body": {"S": "x" * 200}}
        operations = {
            "GetItem": _cost(endpoint.pid, lambda: dynamodb.get_item(TableName=table, Key=key), requests),
            "PutItem": _cost(endpoint.pid, lambda: dynamodb.put_item(TableName=table, Item=item), requests),
        }
    return {"requests": requests, "operations": operations,
            "floor_ms": round(statistics.median(o["total_ms"] for o in operations.values()), 3),
            "cpus": os.cpu_count()}


def ceiling_jobs_per_s(floor_ms: float, requests_per_job: float, cpus: int | None = None) -> float:
    """Jobs per second if a job cost only `requests_per_job` requests at `floor_ms` of CPU each, on every CPU."""
    return round((cpus or os.cpu_count() or 1) * 1000 / (floor_ms * requests_per_job), 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=REQUESTS)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    if args.requests < 1:
        parser.error("--requests must be at least 1")
    results = measure(args.requests)
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"CPU per request on the embedded stack ({results['requests']} each, {results['cpus']} CPUs)")
    for name, cost in results["operations"].items():
        print(f"  {name:10} client {cost['client_ms']:.3f} ms + endpoint {cost['endpoint_ms']:.3f} ms"
              f" = {cost['total_ms']:.3f} ms")
    print(f"  floor: {results['floor_ms']} ms a request; at 14 requests a job at most "
          f"{ceiling_jobs_per_s(results['floor_ms'], 14)} jobs/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
