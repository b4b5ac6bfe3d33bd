"""The crash-point soak: the embedded stack under a multi-tenant workload while named fault points kill its
components, then an audit of everything it left behind (tests/soak/audit.py).

What runs, as on AWS but on this machine:
- submitters creating jobs for several tenants (the store's create, with Idempotency-Keys), in this process;
- the worker side, in a process of its own (tests/soak/workers.py, as the ECS service runs the workers): a pool
  of onward.runtime.worker.Worker threads, a worker that dies (InjectedCrash) replaced by a new one with a new id, as a
  restarted process would be; the reaper (onward.maintenance.reaper.reap_once at `onward up`'s pace for the lease) and
  the
  pipeline heartbeats, restarted when it dies; the faults at the workers', the store's and the reaper's points;
- the relay and the projector behind their local event-source pollers (onward_infra.pollers), calling the Lambda
  handlers, each shard's batch in a thread of its own (as Lambda runs one invocation per shard); a poller
  that dies is polled again, each crashed shard resuming from its last good position, as Lambda would;
- a canceller that cancels random jobs while they are queued, running or finished.
Faults (tests/soak/faults.py): random crashes at every named fault point, and aimed faults at chosen jobs'
first attempts (dies after claim, dies mid-job, zombie, reaper race, cancel race, cancel while running).

    python -m tests.soak.driver --jobs 20000          # the long soak; prints the audit table
    python -m tests.soak.driver --jobs 300 --seed 3   # exit status 1 when a check fails
    python -m tests.soak.driver --jobs 2000 --restart-at 0.5   # the endpoint restarts from its data dir midway
"""

from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")  # before the loggers are built on import
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

import argparse
import dataclasses
import itertools
import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from onward.bootstrap import Deployment
from onward.domain.archive import LATEST_VERSIONS, ArchivedJob
from onward.domain.backoff import BackoffPolicy
from onward.domain.models import NewJob, OutboxEvent
from onward.domain.states import TERMINAL_STATES
from onward.entrypoints import archiver as archiver_handler
from onward.entrypoints import projector as projector_handler
from onward.entrypoints import relay as relay_handler
from onward.faults import InjectedCrash, fault_subject, installed
from onward.pipeline.archive.parquet import ParquetDirectory, record_of
from onward.pipeline.relay.relay import Relay
from onward.store.dynamo.attributes import Item, from_item
from onward.store.dynamo.run_reads import runs_of_items
from onward.store.dynamo.writes import job_from_item
from onward.store.service import JobStore
from onward_infra.endpoint import EmbeddedEndpoint, EndpointProcess
from onward_infra.metering import MeterReading, RemoteMeter
from onward_infra.platform import PlatformOptions
from onward_infra.pollers import EventsStreamPoller, OutboxStreamPoller
from tests.soak.audit import Audit, Injected, KinesisCopy, Snapshot, ViewRow, audit
from tests.soak.faults import RANDOM_POINTS, Aim, FaultRates, RandomFaults, job_of
from tests.soak.workers import (
    JOB_TYPE,
    SideReport,
    Start,
    Supervised,
    WorkerSideProcess,
    cancel_noting,
    tally,
)

STREAM_SHARDS = 4  # the topology the soak runs on: several stream shards, splitting while it runs
SPLIT_EVERY_S = 20.0
SUBMITTERS = 4  # threads creating the workload's jobs at once
SETTLE_CHECK_JOBS = 100  # jobs a settle check reads at a time (one BatchGetItem of rows, one of views)
TENANTS = ("acme", "globex", "initech", "umbrella")


@dataclass(frozen=True)
class SoakConfig:
    jobs: int = 300
    tenants: int = 4
    workers: int = 6
    lease_s: float = 1.0
    aimed_per_kind: int = 3  # jobs per Aim
    seed: int = 7
    batch_size: int = 100
    timeout_s: float = 600.0
    rates: FaultRates = field(default_factory=FaultRates)
    flaky_share: float = 0.1  # jobs whose first attempt raises (a failed attempt, retried after backoff)
    cancel_share: float = 0.03  # jobs the canceller cancels at a random moment
    progress: bool = False  # lines on stderr: every 500 jobs submitted, then every 30 s while it settles
    heartbeat_s: float = 1.0  # pipeline heartbeats, as the platform commits them (every 5 s there)
    # How often the reaper runs; None: as `onward up` runs it for the lease (PlatformOptions.reaper_every_s: a
    # pass is 32 Queries, one per lease shard, nearly all of empty partitions; it ran every 0.2 s).
    reaper_every_s: float | None = None
    # Shards each mapping polls at once (Lambda runs one invocation per shard): the outbox stream splits every
    # 20 s, and polled one after another its shards (40+ after 15 minutes) left the view thousands of jobs behind.
    poll_concurrency: int = 8
    poll_every_s: float = 0.25  # a mapping's rounds start at most this often (see Soak._poll)
    worker_processes: int = 1  # the workers split among this many processes (the first also runs the reaper)
    reshard_events_at: float | None = 0.5  # share of jobs submitted when the events stream doubles its shards
    restart_at: float | None = None  # share of jobs submitted when everything stops and the stack restarts


@dataclass(frozen=True)
class _Planned:
    """One job of the workload, every random choice about it already drawn."""

    number: int
    tenant: str
    request: NewJob
    aimed: bool
    cancel_after_s: float | None  # cancelled that long after it is created; None: not cancelled


def _segments(planned: list[_Planned], cuts: list[int]) -> list[list[_Planned]]:
    """`planned` split before each job number in `cuts`."""
    segments: list[list[_Planned]] = [[]]
    for job in planned:
        if job.number in cuts and segments[-1]:
            segments.append([])
        segments[-1].append(job)
    return segments


@dataclass(frozen=True)
class SoakResult:
    audit: Audit
    seconds: float
    jobs: int
    stack_restarts: int = 0


class Soak:
    """One soak run on a deployed stack: `deployment` must be the one the handlers take from os.environ."""

    def __init__(self, deployment: Deployment, config: SoakConfig,
                 restart_stack: Callable[[], None] | None = None) -> None:
        """`restart_stack`: called at `config.restart_at`, with every component stopped, to restart the
        endpoint (from the state it kept); the components start again once it returns."""
        assert (config.restart_at is None) == (restart_stack is None), "restart_at needs a restart_stack"
        settings = self._settings = deployment.settings
        self._restart_stack = restart_stack
        self._components: list[Supervised] = []
        self.stack_restarts = 0
        self._deployment = deployment
        self._archive_dir = deployment.environ.get("ONWARD_ARCHIVE_DIR", "")  # run_soak's
        self._config = config
        self._rng = random.Random(config.seed)
        self._db = settings.client("dynamodb")
        self.store = JobStore(settings, client=self._db, backoff=BackoffPolicy(base_s=0.05, cap_s=0.5))
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._random = RandomFaults(config.rates, config.seed)  # the relay's and the projector's
        # The store's passes here are the planned cancels only: at the plan's rate, none forced (the worker
        # side, whose transitions are nearly all of them, forces its own first fires).
        self._store_faults = RandomFaults(dataclasses.replace(config.rates, min_fires=0), config.seed + 1)
        self._aims: dict[str, Aim] = {}  # job id -> its aimed fault
        self._cancel_answers: list[tuple[str, str, str]] = []
        self._sides_running: list[WorkerSideProcess] = []  # the workers and the reaper, in processes of their own
        self._sides = SideReport()  # what every worker side of the run did
        self._scratch = tempfile.TemporaryDirectory(prefix="onward-soak-side-")
        self._handled: Counter[tuple[str, int]] = Counter()
        self._pending: tuple[int, int, int] | None = None  # the last check's counts, for progress lines
        self._applied_before = 0  # the projector's applied events when the run started (progress lines)
        self._submitted: list[str] = []
        # jobs not yet seen terminal with the view at their version, oldest first (a dict as an ordered set)
        self._unsettled: dict[str, None] = {}
        self._checked = 0  # how many of _submitted were added to _unsettled
        self._started = time.monotonic()

    # --- faults ---------------------------------------------------------------------------------------
    # The workers' and the reaper's faults are the worker side's (tests/soak/workers.py); here, the relay's,
    # the projector's, and the store's in this process (the planned cancels).

    def _random_hook(self, point: str) -> Callable[[str], None]:
        def hook(name: str) -> None:
            subject = fault_subject()
            if point == "projector.after_record" and subject is not None:
                shard, _, sequence = subject.rpartition(":")
                with self._lock:
                    self._handled[(shard, int(sequence))] += 1
            if point.startswith("store."):
                if job_of(subject) not in self._aims and self._store_faults.decide(point):
                    raise InjectedCrash(f"{name} {subject or ''}".strip())
                return
            if self._random.decide(point):
                raise InjectedCrash(f"{name} {subject or ''}".strip())
        return hook

    def _cancel(self, job_id: str, delay_s: float) -> None:
        time.sleep(delay_s)
        cancel_noting(self.store, job_id, self._lock, self._cancel_answers)

    @contextmanager
    def _faults(self) -> Iterator[None]:
        points = [point for point in RANDOM_POINTS if point.startswith(("relay.", "projector.", "store."))
                  and point != "store.reap.before_transition"]
        with ExitStack() as stack:
            for point in points:
                stack.enter_context(installed(point, self._random_hook(point)))
            yield

    # --- the components ---------------------------------------------------------------------------------

    def _reshard_events_stream(self) -> None:
        """Double the events stream's shards (UNIFORM_SCALING), as an operator would under load: every open
        shard closes, its children open, and the projector must read each child after its parent."""
        kinesis = self._settings.client("kinesis")
        stream = self._settings.require("events_stream")
        summary = kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]
        kinesis.update_shard_count(StreamName=stream, TargetShardCount=2 * summary["OpenShardCount"],
                                   ScalingType="UNIFORM_SCALING")

    def _relay_loop(self) -> Callable[[], None]:
        outbox = self._db.describe_table(TableName=self._settings.require("outbox_table"))["Table"]
        deployment = self._deployment  # its relay given the outbox, to recover from a trimmed stream
        recovering = Relay(deployment.events_publisher, deployment.checkpoint_store, deployment.parked_records,
                           deployment.outbox_reader)
        poller = OutboxStreamPoller(self._settings.client("dynamodbstreams"), outbox["LatestStreamArn"],
                                    relay_handler.handler, recovering,
                                    self._deployment.checkpoint_store, batch_size=self._config.batch_size,
                                    concurrency=self._config.poll_concurrency)
        return lambda: self._poll(poller)

    def _projector_loop(self) -> Callable[[], None]:
        poller = EventsStreamPoller(self._settings.client("kinesis"), self._settings.require("events_stream"),
                                    projector_handler.handler, self._deployment.checkpoint_store,
                                    batch_size=self._config.batch_size, concurrency=self._config.poll_concurrency)
        return lambda: self._poll(poller)

    def _archiver_poller(self) -> EventsStreamPoller:
        """The archiver's own mapping on the events stream (its position apart from the projector's)."""
        return EventsStreamPoller(self._settings.client("kinesis"), self._settings.require("events_stream"),
                                  archiver_handler.handler, self._deployment.checkpoint_store,
                                  batch_size=self._config.batch_size, consumer="local-mapping:archiver",
                                  concurrency=self._config.poll_concurrency)

    def _archiver_loop(self) -> Callable[[], None]:
        poller = self._archiver_poller()
        return lambda: self._poll(poller)

    def _drain_archiver(self) -> None:
        """Once everything stopped: the archiver reads what is left of the stream (from its stored position),
        as its mapping would go on after the run, so the audit sees the archive of every finished job."""
        poller = self._archiver_poller()
        while poller.poll_once():
            pass
        poller.close()

    def _archive(self) -> tuple[dict[str, ArchivedJob], int]:
        """Each job's newest archived version, and how many records the archive holds in all."""
        import duckdb

        directory = ParquetDirectory(self._archive_dir)
        if not directory.has_files():
            return {}, 0
        relation = duckdb.sql(LATEST_VERSIONS.format(source=directory.source()))
        records = [record_of(dict(zip(relation.columns, row, strict=True))) for row in relation.fetchall()]
        latest = {record.job_id: record for record in records}
        ((total,),) = duckdb.sql(f"SELECT count(*) FROM {directory.source()}").fetchall()
        return latest, int(total)

    def _poll(self, poller: OutboxStreamPoller | EventsStreamPoller) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            taken = poller.poll_once()
            # A round at most every poll_every_s: each shard is read at most that often, as Lambda polls a
            # stream's shards (DynamoDB Streams about 4 times a second): rounds of shards polled at once, back
            # to back, read mostly empty shards and handed the handlers batches of a record or two.
            pause_s = self._config.poll_every_s - (time.monotonic() - started)
            self._stop.wait(max(pause_s, 0.0 if taken else 0.05))
        poller.close()
        poller.write_positions()  # as LocalPlatform.stop: a stop leaves exact positions

    def _submit(self, numbers: range) -> None:
        """Create jobs `numbers` of the workload, SUBMITTERS at a time (as several clients create jobs at
        once); the first `aimed_per_kind * len(Aim)` are aimed at (they are created before any worker
        starts, so each is aimed before it can be claimed). The events stream is resharded and the stack
        restarted between two jobs, once every job before that point is created. Every random choice is drawn
        first, in job order, so a seed gives the same workload however the submitters interleave."""
        config = self._config
        planned = [self._plan(number) for number in numbers]
        reshard_at = None if config.reshard_events_at is None else int(config.jobs * config.reshard_events_at)
        restart_at = None if config.restart_at is None else int(config.jobs * config.restart_at)
        with ThreadPoolExecutor(SUBMITTERS, thread_name_prefix="soak-submitter") as submitters:
            for segment in _segments(planned, [at for at in (reshard_at, restart_at) if at is not None]):
                if segment and segment[0].number == reshard_at:
                    self._reshard_events_stream()
                if segment and segment[0].number == restart_at:
                    self._restart()
                list(submitters.map(self._create, segment))

    def _plan(self, number: int) -> _Planned:
        config = self._config
        tenants = TENANTS[: config.tenants]
        aimed = number < config.aimed_per_kind * len(Aim)
        params: dict[str, Any] = {"ms": self._rng.choice((1, 5, 10, 20))}
        if not aimed and self._rng.random() < config.flaky_share:  # an aimed first attempt must report
            params["fail_attempts"] = 1
        cancel_after_s = None
        if not aimed and self._rng.random() < config.cancel_share:
            cancel_after_s = self._rng.uniform(0, 1.0)
        return _Planned(number, tenants[number % len(tenants)], NewJob(type=JOB_TYPE, params=params, max_attempts=8),
                        aimed, cancel_after_s)

    def _create(self, planned: _Planned) -> None:
        created = self.store.create(planned.tenant, planned.request, idempotency_key=f"soak-{planned.number}")
        job_id = created.job.job_id
        with self._lock:
            self._submitted.append(job_id)
            submitted = len(self._submitted)
        if self._config.progress and submitted % 500 == 0:
            print(f"soak: {time.monotonic() - self._started:.0f} s: {submitted}/{self._config.jobs} submitted",
                  file=sys.stderr, flush=True)
        if planned.aimed:
            self._aims[job_id] = list(Aim)[planned.number % len(Aim)]
        elif planned.cancel_after_s is not None:
            threading.Thread(target=self._cancel, args=(job_id, planned.cancel_after_s), daemon=True).start()

    # --- running ----------------------------------------------------------------------------------------

    def run(self) -> SoakResult:
        started = self._started = time.monotonic()
        before = projector_handler.totals.snapshot()
        self._applied_before = before["applied"]
        aimed = min(self._config.jobs, self._config.aimed_per_kind * len(Aim))
        self._submit(range(aimed))
        with self._scratch, self._faults():
            self._start_components()
            try:
                self._submit(range(aimed, self._config.jobs))
                self._settle(started)
            finally:
                self._stop_components()
            self._drain_archiver()
        after = projector_handler.totals.snapshot()
        projected = {name: after[name] - before.get(name, 0) for name in after}
        snapshot = self.snapshot(projected, dict(self._handled))
        sides = self._sides
        restarts, errors = tally(self._components)
        restarts += sides.restarts
        errors += sides.errors
        fired = Counter(self._random.fired) + Counter(self._store_faults.fired) + sides.fired
        injected = Injected(
            fired=dict(fired),
            restarts=dict(restarts),
            real_errors={kind: count for kind, count in errors.items() if count},
            zombie_attempts=frozenset(sides.zombies),
            raced_reaper=frozenset(sides.raced),
            cancelled_while_running=frozenset(sides.cancelled_running),
            cancel_answers=tuple(self._cancel_answers + sides.cancel_answers),
        )
        return SoakResult(audit(snapshot, injected, list(self._submitted)), time.monotonic() - started,
                          len(self._submitted), self.stack_restarts)

    def _start_components(self) -> None:
        self._stop = threading.Event()
        config = self._config
        reaper_every_s = (PlatformOptions(lease_s=config.lease_s).reaper_every_s if config.reaper_every_s is None
                          else config.reaper_every_s)
        sides = min(config.worker_processes, config.workers)
        for side in range(sides):
            report_path = os.path.join(self._scratch.name, f"side-{self.stack_restarts}-{side}.json")
            workers = config.workers // sides + (side < config.workers % sides)
            self._sides_running.append(WorkerSideProcess(Start(
                workers, config.lease_s, reaper_every_s if side == 0 else None, config.heartbeat_s,
                config.seed + 7919 * side, config.rates, dict(self._aims), report_path)).start())
        # One poller each, polled again after each crash: a crash is the function's (an invocation dying), and
        # Lambda's mapping outlives it, with what it knows of the shards (a poller built again after each
        # crash read every closed shard of the split streams again, and re-read every position).
        relay, projector, archiver = self._relay_loop(), self._projector_loop(), self._archiver_loop()
        self._components += [Supervised("relay", lambda: relay, self._stop).start(),
                             Supervised("projector", lambda: projector, self._stop).start(),
                             Supervised("archiver", lambda: archiver, self._stop).start()]

    def _stop_components(self) -> None:
        sides, self._sides_running = self._sides_running, []
        for side in sides:
            self._sides.merge(side.stop())
        self._stop.set()
        for component in self._components:
            component.join()

    def _restart(self) -> None:
        """Everything stops as `onward up` does on Ctrl-C (workers stop claiming and finish their jobs), the
        stack restarts from what it kept, and everything starts again, resuming from the checkpoints."""
        assert self._restart_stack is not None
        self._stop_components()
        self._restart_stack()
        self.stack_restarts += 1
        self._start_components()

    def _settle(self, started: float) -> None:
        """Wait until every job is terminal and the view shows each job's row version."""
        deadline = started + self._config.timeout_s
        reported = time.monotonic()
        while time.monotonic() < deadline:
            if self._settled():
                return
            if self._config.progress and time.monotonic() - reported > 30:
                reported = time.monotonic()
                states = self.store.tenant_states().values()
                projected = projector_handler.totals.snapshot()
                # The view's progress, counted: events the projector applied (each job's events, versions 1..N,
                # are applied once each) against the run's before it. A settle check's "view behind" counts
                # every job past the first chunk that is not settled: at most that many.
                print(f"soak: {time.monotonic() - started:.0f} s: {len(self._submitted)} submitted, "
                      f"{sum(s.load().waiting for s in states)} waiting, {sum(s.usage.running for s in states)} "
                      f"running, {projected['applied'] - self._applied_before} events applied to the view; last "
                      f"check (missing, not terminal, view behind at most): {self._pending}",
                      file=sys.stderr, flush=True)
            time.sleep(1.0 if self._pending is None else min(5.0, 0.5 + sum(self._pending) / 1000))
        raise TimeoutError(f"the soak did not settle within {self._config.timeout_s} s")

    def _settled(self) -> bool:
        """The tenants' counters first (one Query: nothing running or waiting means every job ended), then
        the jobs not yet seen settled, oldest first, SETTLE_CHECK_JOBS at a time, read by key, until a chunk
        holds one not settled: a settled job (terminal, its view at its row's version) stays settled, and
        the view settles roughly in commit order, so a check reads about one chunk, not every job left,
        and the pipeline it waits for keeps the endpoint."""
        if any(state.usage.running or state.load().waiting for state in self.store.tenant_states().values()):
            self._pending = None
            return False
        with self._lock:
            self._unsettled.update(dict.fromkeys(self._submitted[self._checked:]))
            self._checked = len(self._submitted)
        while self._unsettled:
            chunk = list(itertools.islice(self._unsettled, SETTLE_CHECK_JOBS))
            jobs = self._get_by_key(self._settings.require("jobs_table"),
                                    [{"pk": {"S": f"JOB#{j}"}, "sk": {"S": "JOB"}} for j in chunk])
            rows = {item["pk"]["S"].removeprefix("JOB#"): job_from_item(item)[0] for item in jobs}
            terminal = [j for j, job in rows.items() if job.state in TERMINAL_STATES]
            views = {item["job_id"]["S"]: int(item["version"]["N"]) for item in self._get_by_key(
                self._settings.require("status_table"), [{"job_id": {"S": j}} for j in terminal])}
            settled = [j for j in terminal if views.get(j) == rows[j].version]
            for j in settled:
                del self._unsettled[j]
            if len(settled) < len(chunk):
                missing = len(chunk) - len(rows)
                not_terminal = len(rows) - len(terminal)
                # (jobs past the chunk, not read: counted as their view being behind)
                self._pending = (missing, not_terminal, len(self._unsettled) - missing - not_terminal)
                return False
        return True

    def _get_by_key(self, table: str, keys: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The items at `keys` (BatchGetItem, 100 keys a request, unprocessed keys asked again)."""
        for start in range(0, len(keys), 100):
            request: dict[str, Any] = {table: {"Keys": keys[start:start + 100], "ConsistentRead": True}}
            while request:
                response = self._db.batch_get_item(RequestItems=request)
                yield from response["Responses"].get(table, [])
                request = response.get("UnprocessedKeys") or {}

    # --- reading back -----------------------------------------------------------------------------------

    def _scan(self, table: str) -> Iterator[dict[str, Any]]:
        for page in self._db.get_paginator("scan").paginate(TableName=table):
            yield from page["Items"]

    def snapshot(self, projected: dict[str, int], handled: dict[tuple[str, int], int]) -> Snapshot:
        jobs: dict[str, Any] = {}
        partition: dict[str, list[Item]] = {}  # a job's items: its runs as the store reads them (issue 34)
        results: dict[str, Any] = {}
        for item in self._scan(self._settings.require("jobs_table")):
            pk, sk = item["pk"]["S"], item["sk"]["S"]
            if not pk.startswith("JOB#"):
                continue
            job_id = pk.removeprefix("JOB#")
            if sk == "JOB":
                jobs[job_id] = job_from_item(item)[0]
                partition.setdefault(job_id, []).append(item)
            elif sk.startswith("RUN#"):
                partition.setdefault(job_id, []).append(item)
                if "result" in item:  # on the run record that completed the job (issue 34)
                    results[job_id] = from_item(item)["result"]
        runs = {job_id: runs_of_items(items)[1] for job_id, items in partition.items()}
        outbox: dict[str, list[OutboxEvent]] = {}
        for event in self._deployment.outbox_reader.all():
            outbox.setdefault(event.job_id, []).append(event)
        view = self._deployment.status_view.all()
        archive, archive_rows = self._archive()
        return Snapshot(
            jobs=jobs,
            runs={j: sorted(rs, key=lambda r: r.attempt) for j, rs in runs.items()},
            results=results,
            outbox={j: sorted(es, key=lambda e: e.version) for j, es in outbox.items()},
            view={row.job_id: ViewRow(row.job_id, row.status.value, row.version) for row in view},
            kinesis=self._kinesis(),
            projected=projected,
            handled=handled,
            archive=archive,
            archive_rows=archive_rows,
        )

    def _kinesis(self) -> list[KinesisCopy]:
        kinesis = self._settings.client("kinesis")
        stream = self._settings.require("events_stream")
        copies: list[KinesisCopy] = []
        shards = kinesis.list_shards(StreamName=stream)["Shards"]
        parent_of = {shard["ShardId"]: shard.get("ParentShardId") for shard in shards}

        def generation(shard_id: str | None) -> int:
            return -1 if shard_id is None else 1 + generation(parent_of.get(shard_id))

        for shard in shards:
            iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                                  ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            while True:
                response = kinesis.get_records(ShardIterator=iterator, Limit=10_000)
                for record in response["Records"]:
                    try:
                        payload = json.loads(record["Data"])
                    except ValueError:
                        continue
                    if not isinstance(payload, dict) or "event_id" not in payload:
                        continue  # not a job event (a watermark heartbeat)
                    copies.append(KinesisCopy(shard["ShardId"], generation(shard["ShardId"]),
                                              int(record["SequenceNumber"]), payload["event_id"],
                                              payload["job_id"], payload["version"]))
                if not response["Records"]:
                    break
                iterator = response["NextShardIterator"]
        return copies


def run_soak(environment: dict[str, str], config: SoakConfig,
             restart_stack: Callable[[], None] | None = None) -> SoakResult:
    """Run one soak on the stack `environment` names (endpoint, tables, stream); it must already be in
    os.environ, where the handlers take their Deployment from: the soak shares that Deployment.
    `restart_stack`: see Soak. The archiver archives to a temporary directory (ONWARD_ARCHIVE_DIR, for the
    run), read back by the audit."""
    previous = os.environ.get("ONWARD_ARCHIVE_DIR")
    with tempfile.TemporaryDirectory(prefix="onward-soak-archive-") as archive_dir:
        os.environ["ONWARD_ARCHIVE_DIR"] = archive_dir
        try:
            return Soak(Deployment.from_environment({**os.environ, **environment}), config, restart_stack).run()
        finally:
            if previous is None:
                os.environ.pop("ONWARD_ARCHIVE_DIR", None)
            else:
                os.environ["ONWARD_ARCHIVE_DIR"] = previous


def restarter(endpoint: EndpointProcess) -> Callable[[], None]:
    """Restarts `endpoint` (it must keep its state: "--data-dir" among its flags) and checks that it came back
    with the same stack: a fresh deployment would name every resource anew."""

    def restart() -> None:
        before = dict(endpoint.environment)
        print("soak: restarting the endpoint from its data directory", file=sys.stderr, flush=True)
        endpoint.restart()
        assert endpoint.environment == before, "the endpoint came back with another stack: nothing was restored"
    return restart


def requests_table(reading: MeterReading, jobs: int) -> str:
    """The endpoint's requests by operation, per job of the soak: the workload, its faults, the pipeline's
    polling and the audit's reads together (what the soak cost the endpoint, as AWS would bill it)."""
    total = sum(reading.requests.values())
    lines = [f"requests per job: {total / jobs:.2f} (the audit's reads included)"]
    lines += [f"  {name:40} {count / jobs:8.3f}" for name, count in reading.requests.most_common()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Crash-point soak of the embedded stack, then its audit.")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--worker-processes", type=int, default=1,
                        help="the workers split among this many processes (the first also runs the reaper)")
    parser.add_argument("--tenants", type=int, default=4, choices=range(1, len(TENANTS) + 1))
    parser.add_argument("--aimed-per-kind", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=3 * 3600)
    parser.add_argument("--endpoint", choices=("process", "thread"), default="process",
                        help="the embedded endpoint in a child process (default: its own core) or in this one")
    parser.add_argument("--stream-shards", type=int, default=STREAM_SHARDS,
                        help="open shards of each DynamoDB stream at the start")
    parser.add_argument("--split-every-s", type=float, default=SPLIT_EVERY_S,
                        help="one DynamoDB stream shard splits in two every this many seconds (0: never)")
    parser.add_argument("--restart-at", type=float, default=None, metavar="SHARE",
                        help="when this share of the jobs was submitted, stop everything, restart the endpoint "
                        "process from its data directory (a temporary one) and go on (needs --endpoint process)")
    parser.add_argument("--meter", action="store_true",
                        help="count the endpoint's requests by operation and print them per job at the end "
                        "(needs --endpoint process; counted since the endpoint's last start)")
    args = parser.parse_args(argv)
    # as `onward up` runs against its own endpoint: botocore's checks of each request left to the endpoint
    # (onward/settings.py), in this process and the worker side's
    os.environ.setdefault("ONWARD_PARAMETER_VALIDATION", "false")
    if args.meter and args.endpoint != "process":
        parser.error("--meter reads the endpoint process's meter: use --endpoint process")
    if args.restart_at is not None and args.endpoint != "process":
        parser.error("--restart-at restarts the endpoint process: use --endpoint process")
    config = SoakConfig(jobs=args.jobs, workers=args.workers, tenants=args.tenants,
                        aimed_per_kind=args.aimed_per_kind, seed=args.seed, timeout_s=args.timeout, progress=True,
                        restart_at=args.restart_at, worker_processes=args.worker_processes)
    split_every_s = args.split_every_s or None
    restart_stack = None
    with ExitStack() as stack:
        if args.endpoint == "process":
            flags = ["--stream-shards", str(args.stream_shards)]
            flags += ["--split-every-s", str(split_every_s)] if split_every_s else []
            flags += ["--meter", "requests"] if args.meter else []
            if args.restart_at is not None:
                flags += ["--data-dir", stack.enter_context(tempfile.TemporaryDirectory(prefix="onward-soak-"))]
            endpoint_process = stack.enter_context(EndpointProcess(*flags))
            environment = endpoint_process.environment
            restart_stack = restarter(endpoint_process) if args.restart_at is not None else None
        else:
            endpoint = EmbeddedEndpoint(stream_shards=args.stream_shards, split_every_s=split_every_s)
            environment = stack.enter_context(endpoint).deploy("soak").environment
        os.environ.update(environment)
        result = run_soak(environment, config, restart_stack)
        reading = RemoteMeter(environment["AWS_ENDPOINT_URL"]).reset() if args.meter else None
    restarted = f", the stack restarted {result.stack_restarts} time(s) from its data directory" if (
        result.stack_restarts) else ""
    print(f"soak: {result.jobs} jobs, {config.workers} workers, {config.tenants} tenants, seed {config.seed}: "
          f"{result.seconds:.1f} s ({result.jobs / result.seconds:.1f} jobs/s){restarted}")
    if reading is not None:
        print(requests_table(reading, result.jobs))
    print(result.audit.table())
    print("AUDIT PASSED" if result.audit.ok else "AUDIT FAILED")
    return 0 if result.audit.ok else 1


if __name__ == "__main__":
    sys.exit(main())
