"""What running handlers in a child process costs: a no-op handler called in the worker's thread, run in the
worker's kept child (onward.runtime.execution.HandlerProcess, as the Worker does), and run in a child forked for the
attempt (what the kept child saves); one worker and four at once, in a process that has imported what a worker
imports (boto3, the store), as is and with memory ballast (a fork copies the page tables, so its cost grows
with the worker's resident memory).

    .venv/bin/python -m bench.execution [--attempts 300] [--ballast-mb 0,100] [--json]

Prints per attempt the median and p99 until the worker has the handler's answer, and the attempts per second
of all workers together. Figures are from a shared machine: compare the rows of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from dataclasses import asdict, dataclass

import onward.store.service  # noqa: F401 - a worker's imports (boto3, botocore, pydantic): its resident memory
from onward.runtime.execution import HandlerProcess, JobContext, JobHandler, Returned


def noop(context: JobContext) -> dict[str, int]:
    return {"ok": 1}


class OneHandler:
    version = 1

    def get(self, job_type: str) -> JobHandler | None:
        return noop


def context(n: int) -> JobContext:
    job_id = f"{n:032x}"
    return JobContext(job_id, "acme", "bench.noop", {}, 1, f"{job_id}:1")


@dataclass(frozen=True)
class Row:
    ballast_mb: int
    rss_mb: float
    workers: int
    in_thread_p50_ms: float
    kept_child_p50_ms: float  # until the worker has the answer
    kept_child_p99_ms: float
    kept_child_attempts_per_s: float  # all workers together
    forked_child_p50_ms: float
    forked_child_p99_ms: float
    forked_child_attempts_per_s: float


def _rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _in_thread(attempts: int) -> list[float]:
    times: list[float] = []
    for n in range(attempts):
        started = time.perf_counter()
        noop(context(n))
        times.append(time.perf_counter() - started)
    return times


def _in_child(attempts: int, fork_each: bool) -> list[float]:
    times: list[float] = []
    process = HandlerProcess(OneHandler())
    process.run(context(0), timeout_s=60, stop_grace_s=5)  # the kept child is forked once, before the clock
    for n in range(attempts):
        if fork_each:
            process.close()
        started = time.perf_counter()
        outcome = process.run(context(n), timeout_s=60, stop_grace_s=5)
        times.append(time.perf_counter() - started)
        assert isinstance(outcome, Returned), outcome
    process.close()
    return times


def _workers(attempts: int, workers: int, fork_each: bool) -> tuple[list[float], float]:
    """Every attempt's time, and attempts per second of all workers together."""
    results: list[list[float]] = [[] for _ in range(workers)]
    threads = [threading.Thread(target=lambda i=i: results[i].extend(_in_child(attempts, fork_each)))
               for i in range(workers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    times = sorted(t for worker in results for t in worker)
    return times, len(times) / elapsed


def measure(attempts: int, ballast_mb: int, workers: int) -> Row:
    ballast = bytearray(ballast_mb * 1024 * 1024)
    for offset in range(0, len(ballast), 4096):  # touch every page: resident, as a worker's heap would be
        ballast[offset] = 1
    in_thread = _in_thread(attempts)
    kept, kept_rate = _workers(attempts, workers, fork_each=False)
    forked, forked_rate = _workers(attempts, workers, fork_each=True)

    def ms(times: list[float], quantile: float) -> float:
        return round(times[max(0, int(len(times) * quantile) - 1)] * 1000, 2)

    row = Row(ballast_mb=ballast_mb, rss_mb=round(_rss_mb(), 1), workers=workers,
              in_thread_p50_ms=round(statistics.median(in_thread) * 1000, 3),
              kept_child_p50_ms=ms(kept, 0.5), kept_child_p99_ms=ms(kept, 0.99),
              kept_child_attempts_per_s=round(kept_rate, 1),
              forked_child_p50_ms=ms(forked, 0.5), forked_child_p99_ms=ms(forked, 0.99),
              forked_child_attempts_per_s=round(forked_rate, 1))
    del ballast
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--attempts", type=int, default=300, help="attempts per worker per row")
    parser.add_argument("--ballast-mb", default="0,100", help="extra resident memory per row, comma separated")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = [measure(args.attempts, int(mb), workers) for mb in args.ballast_mb.split(",") for workers in (1, 4)]
    if args.json:
        print(json.dumps([asdict(row) for row in rows], indent=2))
        return 0
    print("                                       kept child (the Worker's)      forked per attempt")
    print("ballast  RSS     workers  in thread   p50      p99      attempts/s    p50      p99      attempts/s")
    for r in rows:
        print(f"{r.ballast_mb:>4} MB  {r.rss_mb:>4.0f} MB  {r.workers:>7}  {r.in_thread_p50_ms:>6.3f} ms  "
              f"{r.kept_child_p50_ms:>5.2f} ms {r.kept_child_p99_ms:>5.2f} ms {r.kept_child_attempts_per_s:>8.0f}   "
              f"{r.forked_child_p50_ms:>5.2f} ms {r.forked_child_p99_ms:>5.2f} ms "
              f"{r.forked_child_attempts_per_s:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
