"""`onward`: the command line. Local-stack commands import infra (moto) lazily, so `onward worker` runs
against AWS without it."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence

from onward.models import NewJob
from onward.reaper import run_reaper
from onward.settings import Settings
from onward.states import is_terminal
from onward.store import JobStore
from onward.worker import Registry, Worker


def _wait_for_interrupt(stop: threading.Event) -> None:
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        stop.set()


def cmd_endpoint(args: argparse.Namespace) -> int:
    from infra.endpoint import EmbeddedEndpoint, export_lines

    with EmbeddedEndpoint(port=args.port) as endpoint:
        deployment = endpoint.deploy()
        print("# Onward embedded AWS endpoint on", endpoint.url, "- paste these lines into a shell:")
        for line in export_lines(deployment.environment):
            print(line)
        print("# Ctrl-C stops it.", flush=True)
        _wait_for_interrupt(threading.Event())
    return 0


def _start_pool(store: JobStore, registry: Registry, size: int, lease_s: float) -> list[tuple[Worker, threading.Thread]]:
    pool = []
    for number in range(size):
        worker = Worker(store, registry, worker_id=f"w-{number:02d}", lease_s=lease_s)
        thread = threading.Thread(target=worker.run, name=worker.worker_id, daemon=True)
        thread.start()
        pool.append((worker, thread))
    return pool


def _stop_pool(pool: list[tuple[Worker, threading.Thread]]) -> None:
    for worker, _ in pool:
        worker.shutdown()
    for _, thread in pool:
        thread.join(timeout=30)


def cmd_worker(args: argparse.Namespace) -> int:
    module = importlib.import_module(args.module)
    registry = getattr(module, "registry", None)
    if not isinstance(registry, Registry):
        print(f"onward worker: {args.module} has no `registry` (an onward.worker.Registry)", file=sys.stderr)
        return 2
    store = JobStore(Settings.from_environment())
    pool = _start_pool(store, registry, args.concurrency, args.lease_s)
    print(f"onward worker: {args.concurrency} workers running {sorted(registry.types)}; Ctrl-C stops them",
          flush=True)
    _wait_for_interrupt(threading.Event())
    _stop_pool(pool)
    return 0


DEMO_WORKLOAD: list[tuple[str, NewJob]] = [
    ("acme", NewJob(type="demo.echo", params={"hello": "world"})),
    ("acme", NewJob(type="demo.sleep", params={"seconds": 3})),
    ("acme", NewJob(type="demo.flaky", params={"failures": 1})),
    ("globex", NewJob(type="demo.fail", max_attempts=2)),
    ("globex", NewJob(type="demo.fail", params={"permanent": True})),
    ("globex", NewJob(type="demo.sleep", params={"seconds": 30})),  # cancelled while it runs
    ("initech", NewJob(type="demo.crash", max_attempts=2)),
    ("initech", NewJob(type="demo.echo", params={"n": 42})),
]


def cmd_up(args: argparse.Namespace) -> int:
    """For now: the embedded endpoint, a worker pool, the reaper and a demo workload, with progress."""
    from infra.endpoint import EmbeddedEndpoint, export_lines

    stop = threading.Event()
    with EmbeddedEndpoint(port=args.port) as endpoint:
        environment = endpoint.deploy().environment
        settings = Settings.from_environment(environment)
        store = JobStore(settings, client=endpoint.client("dynamodb"))
        print(f"Onward: embedded AWS endpoint on {endpoint.url}")
        for line in export_lines(environment):
            print("  " + line)
        from onward.demo import registry

        pool = _start_pool(store, registry, args.workers, args.lease_s)
        reaper = threading.Thread(target=run_reaper, args=(store, 1.0, stop), daemon=True)
        reaper.start()
        jobs = [store.create(tenant, request).job.job_id for tenant, request in DEMO_WORKLOAD]
        print(f"Enqueued {len(jobs)} demo jobs for tenants acme, globex, initech")
        started = time.monotonic()
        cancelled = False
        while not stop.is_set():
            states = [store.get(job_id) for job_id in jobs]
            if not cancelled and states[5].state.value == "running":
                print(f"  cancelling {jobs[5]} (running demo.sleep): {store.cancel(jobs[5]).status.value}")
                cancelled = True
            counts = Counter(job.state.value for job in states)
            summary = " ".join(f"{state}={n}" for state, n in sorted(counts.items()))
            print(f"  t={time.monotonic() - started:5.1f}s {summary}", flush=True)
            if all(is_terminal(job.state) for job in states):
                print("All demo jobs reached a terminal state:")
                for job in states:
                    print(f"  {job.job_id} {job.tenant_id:8} {job.type:11} {job.state.value:12} "
                          f"v{job.version} attempts={job.attempt}")
                break
            stop.wait(1.0)
        if args.exit_when_done:
            stop.set()
        else:
            print("Still serving the endpoint; Ctrl-C stops everything.", flush=True)
            _wait_for_interrupt(stop)
        _stop_pool(pool)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="onward", description="Onward background-job platform")
    commands = parser.add_subparsers(dest="command", required=True)

    endpoint = commands.add_parser("endpoint", help="run the embedded AWS endpoint alone and print its exports")
    endpoint.add_argument("--port", type=int, default=4566)
    endpoint.set_defaults(run=cmd_endpoint)

    worker = commands.add_parser("worker", help="run a worker pool for the handlers in a module")
    worker.add_argument("--module", required=True, help="module with a `registry` (onward.worker.Registry)")
    worker.add_argument("--concurrency", type=int, default=4)
    worker.add_argument("--lease-s", type=float, default=30.0)
    worker.set_defaults(run=cmd_worker)

    up = commands.add_parser("up", help="run the platform on this machine")
    up.add_argument("--port", type=int, default=4566, help="port of the embedded AWS endpoint")
    up.add_argument("--workers", type=int, default=4)
    up.add_argument("--lease-s", type=float, default=3.0)
    up.add_argument("--exit-when-done", action="store_true", help="stop once the demo jobs have all ended")
    up.set_defaults(run=cmd_up)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
