"""The regional failover drill: two Regions on one machine, the home partitioned while it keeps working, a fenced
failover to the standby, the link healed, the old home's late writes reconciled; then the audit
(tests/drill/checks.py), in the soak's table, ending `AUDIT PASSED` or `AUDIT FAILED`.

The run (docs/regional-recovery.md, "The drill"):
1. The stage (tests/drill/stage.py): Regions A (home), B (standby) and W (the witness's), the replicator
   between A and B (jobs and outbox tables, `--lag-s` each way). A runs the platform (workers with short real
   jobs, the reaper, heartbeats, relay, projector); B runs its warm pipeline (relay and projector on its
   replicated outbox). Clients create jobs at `--rate` a second in A; every acknowledgement is recorded with its
   time; a reader reads sampled jobs' status in both Regions' views (and B's rows) all along.
2. The failure, at T: the replicator partitions A from B. A keeps running and writing (a partition, not a
   crash); one "broken" worker of A holds a job it claimed just before T and ignores the authority lease.
   `onward failover --to B --fence-window-s N` runs as a command; then B's workers, reaper and heartbeats
   start and the clients switch to B. A keeps going for `--a-after-fence-s` (its processes that obey the
   authority lease stop by it), then the broken worker reports, late; A's processes stop.
3. The heal: the link heals, A's late writes replicate into B (last writer wins), the fence reconciler runs
   over B; the drill waits until every job in B is terminal and B's view shows it, reads B back, audits.

    python -m tests.drill.driver                      # `make drill`: the long one
    python -m tests.drill.driver --rate 10 --warmup-s 3   # a short one; exit status 1 when a check fails
"""

from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")  # before the loggers are built on import
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

import argparse
import pickle
import random
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from onward.api.core import view_lag_now
from onward.domain.clock import iso
from onward.domain.freshness import freshness_of
from onward.domain.models import Job, NewJob
from onward.domain.states import TERMINAL_STATES
from onward.runtime.authority import lease_of
from onward.store.dynamo.run_reads import runs_of_items
from onward.store.dynamo.writes import job_from_item
from onward.store.service import JobStore
from tests.drill import parts
from tests.drill.checks import EPOCH_VERSION_BASE, audit_drill, rpo_of
from tests.drill.history import Ack, DrillHistory, Execution, Missing, PageRead, Read
from tests.drill.stage import (
    HOME,
    JOB_TYPE,
    STANDBY,
    Regions,
    RegionSide,
    export,
    now_ms,
    read_executions,
    record_execution,
)
from tests.soak.audit import Audit

TENANTS = ("acme", "globex")
SAMPLE = 40  # jobs a reader round reads in each view: the newest half, the other half at random


@dataclass(frozen=True)
class DrillConfig:
    rate_per_s: float = 20.0  # jobs the clients create a second
    warmup_s: float = 6.0  # from the start to T
    lag_s: float = 0.2  # replication lag, each way
    authority_lease_s: float = 1.5  # ONWARD_AUTHORITY_LEASE_S of both Regions' processes
    authority_check_s: float = 0.5  # ONWARD_AUTHORITY_CHECK_S
    fence_window_s: float = 2.5  # `onward failover --fence-window-s`: the lease + a check + 0.5 s
    a_after_fence_s: float = 3.0  # how long A keeps running after the failover returned
    clients_after_s: float = 4.0  # how long the clients go on creating in B after the switch
    workers: int = 3  # per Region
    lease_s: float = 3.0
    job_ms: int = 30
    settle_timeout_s: float = 90.0
    seed: int = 7
    progress: bool = False
    dump_path: str | None = None  # the history, pickled, for a person to look into a failed row


@dataclass(frozen=True)
class DrillResult:
    audit: Audit
    seconds: float
    failover: parts.Failover | None


class Clients:
    """Create jobs at a steady rate in the Region `target` names, recording each acknowledgement."""

    def __init__(self, store: JobStore, role: str, rate_per_s: float, job_ms: int, lock: threading.Lock) -> None:
        self._target = (store, role)
        self._period_s = 1.0 / rate_per_s
        self._job_ms = job_ms
        self._lock = lock
        self.acks: list[Ack] = []
        self.submitted = 0
        self.refused = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="drill-clients", daemon=True)

    def start(self) -> Clients:
        self._thread.start()
        return self

    def switch(self, store: JobStore, role: str) -> None:
        with self._lock:
            self._target = (store, role)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        number = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            with self._lock:
                store, role = self._target
            tenant = TENANTS[number % len(TENANTS)]
            self.submitted += 1
            try:
                created = store.create(tenant, NewJob(type=JOB_TYPE, params={"ms": self._job_ms}, max_attempts=5),
                                       idempotency_key=f"drill-{number}")
                with self._lock:
                    self.acks.append(Ack(created.job.job_id, role, now_ms()))
            except Exception as error:  # noqa: BLE001 - a refused submission is the client's to retry; counted
                self.refused += 1
                print(f"drill: a submission to {role} was refused: {error!r}", file=sys.stderr)
            number += 1
            next_at += self._period_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))


class Reader:
    """Reads sampled jobs' status in both Regions' views and B's job rows, all along the run; after the
    failover, B's page freshness too."""

    def __init__(self, a: RegionSide, b: RegionSide, clients: Clients, lock: threading.Lock, seed: int) -> None:
        self._a, self._b, self._clients, self._lock = a, b, clients, lock
        self._random = random.Random(seed)
        self.reads: list[Read] = []
        self.pages: list[PageRead] = []
        self.read_errors = 0
        self.failed_over = False
        self.reconciled = False
        self._seq = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="drill-reader", daemon=True)

    def start(self) -> Reader:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _sample(self) -> list[str]:
        with self._lock:
            ids = [ack.job_id for ack in self._clients.acks]
        newest = ids[-SAMPLE // 2:]
        older = ids[:-SAMPLE // 2]
        return newest + self._random.sample(older, min(len(older), SAMPLE // 2))

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            try:
                self.read_once()
            except Exception as error:  # noqa: BLE001 - a read that failed is not a read: counted, not recorded
                self.read_errors += 1
                print(f"drill: a status read failed: {error!r}", file=sys.stderr)

    def read_once(self) -> None:
        ids = self._sample()
        if not ids:
            return
        at = now_ms()
        found: list[Read] = []
        for side in (self._a, self._b):
            for job_id, view in side.deployment.status_view.get_many(ids).items():
                found.append(Read(side.role, "view", job_id, view.status.value, view.version, 0, at))
        for job, _ in rows(self._b, ids).values():
            found.append(Read("B", "row", job.job_id, job.state.value, job.version, 0, at))
        with self._lock:
            for read in found:
                self._seq += 1
                self.reads.append(Read(read.region_role, read.source, read.job_id, read.status, read.version,
                                       self._seq, read.at_ms))
        if self.failed_over:
            self.pages.append(page_of(self._b, self.reconciled))


def page_of(side: RegionSide, reconciled: bool) -> PageRead:
    """The freshness B's API shows with a status now: the view's lag, and the replication block when the
    deployment gives one (docs/regional-recovery.md, "The status page in the new Region")."""
    at = now_ms()
    lag = view_lag_now(side.deployment, at)
    freshness = freshness_of(iso(at), lag, at)
    replication = getattr(freshness, "replication", None) or getattr(lag, "replication", None)
    if replication is not None and hasattr(replication, "model_dump"):
        replication = replication.model_dump(mode="json")
    return PageRead(at, bool(freshness.stale), replication, reconciled)


def rows(side: RegionSide, job_ids: list[str]) -> dict[str, tuple[Job, int]]:
    """The job rows of `job_ids` in `side`'s Region, read consistently, with each row's `region_epoch`."""
    client = side.deployment.client("dynamodb")
    table = side.deployment.settings.require("jobs_table")
    found: dict[str, tuple[Job, int]] = {}
    for start in range(0, len(job_ids), 100):
        request: dict[str, Any] = {table: {"Keys": [{"pk": {"S": f"JOB#{j}"}, "sk": {"S": "JOB"}}
                                                    for j in job_ids[start:start + 100]], "ConsistentRead": True}}
        while request:
            response = client.batch_get_item(RequestItems=request)
            for item in response["Responses"].get(table, []):
                job = job_from_item(item)[0]
                found[job.job_id] = (job, int(item.get("region_epoch", {}).get("N", "0")))
            request = response.get("UnprocessedKeys") or {}
    return found


def scan(side: RegionSide) -> Iterator[dict[str, Any]]:
    client = side.deployment.client("dynamodb")
    for page in client.get_paginator("scan").paginate(TableName=side.deployment.settings.require("jobs_table")):
        yield from page["Items"]


def _log(config: DrillConfig, message: str, started: float) -> None:
    if config.progress:
        print(f"drill: {time.monotonic() - started:5.1f} s: {message}", file=sys.stderr, flush=True)


def run_drill(config: DrillConfig) -> DrillResult:
    started = time.monotonic()
    lock = threading.Lock()
    missing: list[Missing] = []
    with (Regions(config.lag_s, config.authority_lease_s, config.authority_check_s) as regions,
          tempfile.TemporaryDirectory(prefix="onward-drill-") as scratch):
        executions_path = os.path.join(scratch, "executions.jsonl")
        a = RegionSide("A", regions.environments[HOME], workers=config.workers, lease_s=config.lease_s,
                       executions_path=executions_path)
        b = RegionSide("B", regions.environments[STANDBY], workers=config.workers, lease_s=config.lease_s,
                       executions_path=executions_path)
        a.start_pipeline(heartbeats=True)
        store_a = a.start_workers()
        b.start_pipeline(heartbeats=False)  # the warm standby: its relay and projector only
        if lease_of(store_a) is None:
            missing.append(Missing("authority lease (the old home's processes stop by it)", "not in this tree"))
        clients = Clients(store_a, "A", config.rate_per_s, config.job_ms, lock).start()
        reader = Reader(a, b, clients, lock, config.seed).start()
        _log(config, "A runs the platform, B its warm pipeline; clients create jobs in A", started)
        time.sleep(config.warmup_s)

        # The broken worker: claims a job in A just before T with a long lease, ignores the authority lease,
        # reports after the fence.
        broken_store = a.unleased_store()
        broken = broken_store.claim("w-broken", lease_s=120.0)
        broken_started = now_ms()
        partitioned_at = now_ms()
        regions.links.partition(HOME)
        rpo_s = rpo_of(config.lag_s, regions.links.link(HOME, STANDBY).latency_max_s)
        _log(config, f"T: A partitioned from B (RPO {rpo_s:.3f} s); onward failover --to {STANDBY}", started)
        failover = parts.run_failover(export(regions.environments[STANDBY]), STANDBY,
                                      config.fence_window_s)
        if not failover.ok:
            missing.append(Missing("onward failover", failover.output.splitlines()[-1] if failover.output
                                   else "failed"))
        _log(config, f"failover {'done' if failover.ok else 'FAILED'} in {failover.seconds:.1f} s; B's workers "
             "start, clients switch to B", started)
        store_b = b.store()  # a process started now: it writes under the raised epoch
        fence_ends_ms = _fence_end(store_b, config.fence_window_s)
        b.start_workers(store_b)
        b.start_heartbeats()
        b.deployment.replication_status.forget()
        tally = b.start_reconciler(store_b)
        clients.switch(store_b, "B")
        reader.failed_over = True
        time.sleep(config.a_after_fence_s)

        if broken is not None:
            try:
                broken_store.complete(broken, {"attempt": broken.attempt, "region": "A", "broken": True})
            except Exception as error:  # noqa: BLE001 - a refused late report is the fence working: noted
                print(f"drill: the broken worker's late report was refused in A: {error!r}", file=sys.stderr)
            record_execution(executions_path, Execution("A", broken.job_id, broken.attempt, broken_started, now_ms()))
        a.stop()
        _log(config, "the broken worker reported late; A's processes stopped; the link heals", started)
        healed_at = now_ms()
        regions.links.heal()
        regions.links.wait_idle(30)
        reconciled = 0
        if b.reconciler_poller is not None:
            # what the healed link brought, read to the stream's end; then the old home's writes are all in:
            # the drill declares them reconciled (onward.operator.replication), and the page stops saying
            # it may miss some
            poller = b.reconciler_poller
            b.loops.pop("fence-reconciler").stop(10.0)
            caught_up = time.monotonic() + 30
            while poller.poll_once() and time.monotonic() < caught_up:
                pass
            reconciled = tally.restored + tally.adopted
            _declare_reconciled(b, store_b)
            b.loop("fence-reconciler", poller.poll_once, 0.2)
        reader.reconciled = True
        time.sleep(max(0.0, config.clients_after_s - config.a_after_fence_s))
        clients.stop()
        _log(config, f"reconciled {reconciled}; clients stopped; waiting for B to settle", started)
        settled = _settle(b, clients, lock, started + config.settle_timeout_s + time.monotonic() - started)
        reader.stop()
        b.stop()
        _log(config, f"B {'settled' if settled else 'did NOT settle'}; reading B back", started)
        if config.dump_path:
            with open(config.dump_path + ".b-items", "wb") as dump:
                pickle.dump([item for item in scan(b) if not item["pk"]["S"].startswith("JOB#")], dump)
        history = _history(config, a, b, clients, reader, read_executions(executions_path), missing,
                           partitioned_at, rpo_s, int(reconciled), lock, fence_ends_ms, healed_at)
    if config.dump_path:
        with open(config.dump_path, "wb") as dump:
            pickle.dump(history, dump)
    return DrillResult(audit_drill(history), time.monotonic() - started, failover)


def _fence_end(store: JobStore, fence_window_s: float) -> int | None:
    """When the fence window ended (the epoch item's `fenced_at` + the window), None without a raised epoch."""
    fenced_at = store.region_epoch().fenced_at if hasattr(store, "region_epoch") else None
    return None if fenced_at is None else int(fenced_at + fence_window_s * 1000)


def _declare_reconciled(b: RegionSide, store: JobStore) -> None:
    from onward.operator.replication import declare_reconciled

    epoch = store.region_epoch().epoch
    if epoch > 0:
        declare_reconciled(b.deployment.client("dynamodb"), b.deployment.settings.require("jobs_table"), epoch,
                           by="drill", reason="the healed link delivered the old home's writes; reconciled",
                           at=now_ms())
    b.deployment.replication_status.forget()


def _settle(b: RegionSide, clients: Clients, lock: threading.Lock, deadline: float) -> bool:
    """Wait until every acknowledged job is terminal in B and B's view shows its row's version."""
    with lock:
        pending = [ack.job_id for ack in clients.acks]
    while time.monotonic() < deadline:
        found = rows(b, pending)
        terminal = [j for j, (job, _) in found.items() if job.state in TERMINAL_STATES]
        views = b.deployment.status_view.get_many(terminal) if terminal else {}
        pending = [j for j in pending
                   if j not in found or found[j][0].state not in TERMINAL_STATES
                   or (view := views.get(j)) is None or view.version != found[j][0].version]
        if not pending:
            return True
        time.sleep(0.5)
    return False


def _history(config: DrillConfig, a: RegionSide, b: RegionSide, clients: Clients, reader: Reader,
             executions: list[Execution], missing: list[Missing], partitioned_at: int, rpo_s: float,
             reconciled: int, lock: threading.Lock, fence_ends_ms: int | None, healed_at: int) -> DrillHistory:
    jobs_b: dict[str, Job] = {}
    epochs_b: dict[str, int] = {}
    partition_b: dict[str, list[Any]] = {}
    for item in scan(b):
        pk, sk = item["pk"]["S"], item["sk"]["S"]
        if not pk.startswith("JOB#"):
            continue
        job_id = pk.removeprefix("JOB#")
        if sk == "JOB":
            jobs_b[job_id] = job_from_item(item)[0]
            epochs_b[job_id] = int(item.get("region_epoch", {}).get("N", "0"))
        if sk == "JOB" or sk.startswith("RUN#"):  # its runs as the store reads them (issue 34: the row's attempt)
            partition_b.setdefault(job_id, []).append(item)
    runs_b = {job_id: runs_of_items(items)[1] for job_id, items in partition_b.items()}
    versions_a: dict[str, int] = {}
    for read in reader.reads:
        if read.version < EPOCH_VERSION_BASE:
            versions_a[read.job_id] = max(versions_a.get(read.job_id, 0), read.version)
    for item in scan(a):
        if item["sk"]["S"] == "JOB" and item["pk"]["S"].startswith("JOB#"):
            job = job_from_item(item)[0]
            if job.version < EPOCH_VERSION_BASE:
                versions_a[job.job_id] = max(versions_a.get(job.job_id, 0), job.version)
    overlaps = b.deployment.overlap_reader.since(partitioned_at - 600_000, now_ms() + 60_000)
    with lock:
        return DrillHistory(
            partitioned_at_ms=partitioned_at, rpo_s=rpo_s, acks=tuple(clients.acks), reads=tuple(reader.reads),
            executions=tuple(executions), pages=tuple(reader.pages), jobs_b=jobs_b, epochs_b=epochs_b,
            runs_b={j: sorted(rs, key=lambda r: r.attempt) for j, rs in runs_b.items()}, versions_a=versions_a,
            overlap_jobs=frozenset(o.job_id for o in overlaps),
            first_claim_b_ms=min((e.started_ms for e in executions if e.region_role == "B"), default=None),
            reconciled=reconciled, missing=tuple(missing), submitted=clients.submitted,
            fence_ends_ms=fence_ends_ms, healed_at_ms=healed_at)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The two-Region failover drill with a partition, then its audit.")
    defaults = DrillConfig()
    parser.add_argument("--rate", type=float, default=defaults.rate_per_s, help="jobs created a second")
    parser.add_argument("--warmup-s", type=float, default=30.0, help="from the start to the partition (T)")
    parser.add_argument("--lag-s", type=float, default=defaults.lag_s, help="replication lag, each way")
    parser.add_argument("--fence-window-s", type=float, default=defaults.fence_window_s)
    parser.add_argument("--a-after-fence-s", type=float, default=defaults.a_after_fence_s)
    parser.add_argument("--clients-after-s", type=float, default=10.0,
                        help="how long the clients go on creating in B after the switch")
    parser.add_argument("--workers", type=int, default=defaults.workers, help="workers per Region")
    parser.add_argument("--settle-timeout-s", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--dump", metavar="PATH", help="write the run's history there (pickle) to look into it")
    args = parser.parse_args(argv)
    os.environ.setdefault("ONWARD_PARAMETER_VALIDATION", "false")
    config = DrillConfig(rate_per_s=args.rate, warmup_s=args.warmup_s, lag_s=args.lag_s,
                         fence_window_s=args.fence_window_s, a_after_fence_s=args.a_after_fence_s,
                         clients_after_s=args.clients_after_s, workers=args.workers,
                         settle_timeout_s=args.settle_timeout_s, seed=args.seed, progress=True,
                         dump_path=args.dump)
    result = run_drill(config)
    print(f"drill: {HOME} -> {STANDBY}, lag {config.lag_s} s, fence window {config.fence_window_s} s, "
          f"{config.rate_per_s:g} jobs/s: {result.seconds:.1f} s")
    if result.failover is not None and result.failover.output:
        print("onward failover said:\n  " + "\n  ".join(result.failover.output.splitlines()[-12:]))
    print(result.audit.table())
    print("AUDIT PASSED" if result.audit.ok else "AUDIT FAILED")
    return 0 if result.audit.ok else 1


if __name__ == "__main__":
    sys.exit(main())
