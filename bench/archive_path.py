"""N jobs expired through the archive on the local stack: what the archiver reads and writes per job, and
whether every expired job is in the archive.

    .venv/bin/python -m bench.archive_path [--jobs 500] [--tenants 4] [--retention-s 10] [--json]

An embedded endpoint with a retention scale (its TTL deletes a finished job's items `--retention-s` seconds
after the job ends: ONWARD_JOB_RETENTION_DAYS=1 times the scale; docs/retention.md, "Drills on the local
stack"). Jobs of a few tenants are run to a final state in waves of WAVE jobs through the JobStore: most succeed
at once, about a fifth fail once and succeed on their retry, about one in twenty-five fail both of their two
attempts and go dead. After each wave the local pipeline drains: the relay moves the wave's events to Kinesis,
the projector projects them, and the archiver (onward.pipeline.archive.archiver.Archiver, over a poller of its
own on the events stream, as its event source mapping on AWS) writes the finished jobs to a ParquetDirectory in
a temporary directory. The archiver reads through DynamoJobHistory over a dynamodb client of its OWN, whose
botocore `before-call` hook counts its requests by operation and table; its sink is wrapped to count writes and
to measure what Firehose would ingest for the same records (onward.pipeline.archive.firehose.encode, each
record billed rounded up to 5 KB: bench.archive_cost.FIREHOSE_INCREMENT_BYTES).

Then it waits until the endpoint's TTL has deleted every job's row (a consistent Scan a second), and checks
that EVERY expired job is in the archive (DuckDbArchive over onward.domain.archive.LATEST_VERSIONS) at its
final version and state, with one run per attempt (attempts 1..n). `missing` counts the expired jobs that are
not: the exit status is 1 when any is (or when a row outlived the wait). Counts and bytes do not move with the
machine's load; the wall times it prints do.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aws_lambda_powertools.utilities.data_classes.kinesis_stream_event import KinesisStreamRecord

from bench.archive_cost import FIREHOSE_INCREMENT_BYTES
from onward.bootstrap import Deployment
from onward.domain.archive import ArchivedJob
from onward.domain.clock import ManualClock, system_clock
from onward.domain.models import ErrorSummary, NewJob
from onward.operator.history.readers import DuckDbArchive
from onward.pipeline.archive.archiver import Archiver, ArchiveTally
from onward.pipeline.archive.firehose import encode
from onward.pipeline.archive.parquet import ParquetDirectory
from onward.settings import Settings
from onward.store.dynamo.history import DynamoJobHistory
from onward.store.dynamo.keys import JOB_PREFIX, JOB_SK
from onward.store.service import JobStore
from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.pipeline import LocalPipeline
from onward_infra.pollers import EventsStreamPoller

DAY_S = 86_400
JOB_RETENTION_DAYS = 1
WAVE = 25  # jobs run to their end, then the pipeline drains: each wave archived well within the retention
RETRY_WAIT_S = 5.0  # the store's clock moves this far when nothing is due: past a retry's backoff (1-2 s)
TYPES = ("report.export", "mail.send", "image.resize")
FAIL = "fail"
OK = "ok"


@dataclass(frozen=True)
class Expected:
    """A job as the authority last held it, before it expired."""

    tenant: str
    version: int
    state: str
    attempts: int


def plan_outcomes(rng: random.Random) -> tuple[int, list[str]]:
    """(max_attempts, the outcome of each attempt): a fifth fail once then succeed, 1 in 25 go dead."""
    roll = rng.random()
    if roll < 0.04:
        return 2, [FAIL, FAIL]
    if roll < 0.24:
        return 3, [FAIL, OK]
    return 3, [OK]


class RequestCounter:
    """The requests a client sends, by operation and table (botocore's before-call: once per API call, a
    paginated Query once per page)."""

    def __init__(self, client: Any, tables: dict[str, str]) -> None:
        self.counts: Counter[str] = Counter()
        self._tables = tables  # table name -> what to call it
        client.meta.events.register("before-call.dynamodb.*", self._count)

    def _count(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        body = params.get("body") or b"{}"
        table = json.loads(body).get("TableName", "") if isinstance(body, bytes | str) else ""
        self.counts[f"{model.name} {self._tables.get(table, table or '-')}"] += 1


@dataclass
class MeasuredSink:
    """The archive's ParquetDirectory, counting its writes and what Firehose would ingest for the same records."""

    directory: ParquetDirectory
    writes: int = 0
    records: int = 0
    parquet_bytes: int = 0
    firehose_json_bytes: int = 0
    firehose_billed_bytes: int = 0

    def write(self, records: Sequence[ArchivedJob]) -> int:
        written = self.directory.write(records)
        self.writes += 1
        self.records += len(records)
        self.parquet_bytes += written
        for record in records:
            line = len(encode(record))
            self.firehose_json_bytes += line
            self.firehose_billed_bytes += math.ceil(line / FIREHOSE_INCREMENT_BYTES) * FIREHOSE_INCREMENT_BYTES
        return written


@dataclass
class ArchiverUnderTest:
    """The archiver as its Lambda handler runs it, but over clients and a sink of this bench's own."""

    archiver: Archiver
    tally: ArchiveTally = field(default_factory=ArchiveTally)
    batches: int = 0  # invocations with at least one record

    def handler(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        records = [KinesisStreamRecord(raw).kinesis.data_as_bytes() for raw in event.get("Records", [])]
        if records:
            self.batches += 1
            self.archiver.archive_batch(records, self.tally)  # raises: the poller delivers the batch again
        return {"batchItemFailures": []}


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """os.environ with `values` (the relay's and projector's handlers read their Deployment from it) and no
    ONWARD_ARCHIVE_DIR (the pipeline's own archiver stays off: this bench runs its own); restored after."""
    saved = dict(os.environ)
    os.environ.update(values)
    os.environ.pop("ONWARD_ARCHIVE_DIR", None)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_wave(store: JobStore, clock: ManualClock, rng: random.Random, size: int, tenants: int,
             expected: dict[str, Expected]) -> None:
    """Create `size` jobs and run every one to its final state (a single worker, claims in the store's order)."""
    plans: dict[str, list[str]] = {}
    for number in range(size):
        max_attempts, outcomes = plan_outcomes(rng)
        job = store.create(f"tenant-{rng.randrange(tenants)}", NewJob(
            type=TYPES[number % len(TYPES)], max_attempts=max_attempts, params={"n": len(expected) + number})).job
        plans[job.job_id] = outcomes
    idle = 0
    while any(plans.values()):
        lease = store.claim("bench-worker", 30)
        if lease is None:
            idle += 1
            if idle > 20:
                raise RuntimeError(f"jobs never due again: {[j for j, left in plans.items() if left]}")
            clock.advance(RETRY_WAIT_S)
            continue
        idle = 0
        outcome = plans[lease.job_id].pop(0)
        if outcome == OK:
            store.complete(lease, {"rows": rng.randrange(1000)})
        else:
            store.fail(lease, ErrorSummary(error_type="TimeoutError", message="upstream did not answer in 30 s"))
    for job_id in plans:
        job = store.get(job_id)
        expected[job_id] = Expected(job.tenant_id, job.version, job.state.value, job.attempt)


def remaining_jobs(client: Any, table: str, job_ids: set[str]) -> set[str]:
    """The jobs among `job_ids` of which the jobs table still holds the row (one consistent Scan)."""
    held: set[str] = set()
    for page in client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        for item in page["Items"]:
            if item.get("sk", {}).get("S") == JOB_SK:
                job_id = item["pk"]["S"].removeprefix(JOB_PREFIX)
                if job_id in job_ids:
                    held.add(job_id)
    return held


def check_archive(root: Path, expected: dict[str, Expected], expired: set[str]) -> list[str]:
    """The expired jobs that the archive does not hold at their final version and state with one run per attempt."""
    archive = DuckDbArchive(root)
    found = {row["job_id"]: row for row in archive.user_sql(
        "SELECT job_id, tenant, version, state, attempts, [r.attempt FOR r IN runs] AS run_attempts FROM jobs"
    ).records()} if archive.directory.has_files() else {}
    missing = []
    for job_id in sorted(expired):
        want, row = expected[job_id], found.get(job_id)
        run_attempts: Any = None if row is None else row["run_attempts"]  # a DuckDB list: the runs' attempts
        if (row is None or row["tenant"] != want.tenant or row["version"] != want.version
                or row["state"] != want.state or list(run_attempts) != list(range(1, want.attempts + 1))):
            missing.append(job_id)
    return missing


def run(jobs: int = 500, tenants: int = 4, retention_s: float = 10.0, seed: int = 36,
        expiry_timeout_s: float | None = None) -> dict[str, Any]:
    """The bench; returns its figures (see the module's docstring)."""
    scale = retention_s / (JOB_RETENTION_DAYS * DAY_S)
    rng = random.Random(seed)
    started = time.perf_counter()
    with (EmbeddedEndpoint(retention_scale=scale) as endpoint,
          tempfile.TemporaryDirectory(prefix="onward-archive-path-") as scratch):
        deployed = endpoint.deploy().environment | {"ONWARD_JOB_RETENTION_DAYS": str(JOB_RETENTION_DAYS),
                                                    "POWERTOOLS_METRICS_DISABLED": "true"}
        with environment(deployed):
            settings = Settings.from_environment(deployed)
            jobs_table, outbox_table = settings.require("jobs_table"), settings.require("outbox_table")
            clients = {name: endpoint.client(name) for name in ("dynamodb", "dynamodbstreams", "kinesis")}
            deployment = Deployment(settings, clients=clients, environ={})
            pipeline = LocalPipeline.of(deployment)
            archiver_db = endpoint.client("dynamodb")  # the archiver's own: only its requests are counted
            requests = RequestCounter(archiver_db, {jobs_table: "jobs", outbox_table: "outbox"})
            sink = MeasuredSink(ParquetDirectory(Path(scratch) / "archive"))
            under_test = ArchiverUnderTest(Archiver(DynamoJobHistory(archiver_db, jobs_table, outbox_table), sink))
            archiver_poller = EventsStreamPoller(clients["kinesis"], settings.require("events_stream"),
                                                 under_test.handler, deployment.checkpoint_store,
                                                 consumer="bench:archiver", function_name="onward-archiver")
            clock = ManualClock(system_clock() - 60_000)  # behind the real clock: no event decided after now
            store = JobStore(settings, client=endpoint.client("dynamodb"), clock=clock)
            expected: dict[str, Expected] = {}
            while len(expected) < jobs:
                run_wave(store, clock, rng, min(WAVE, jobs - len(expected)), tenants, expected)
                pipeline.drain()
                while archiver_poller.poll_once():
                    pass
            ran_s = time.perf_counter() - started

            waiting_since = time.perf_counter()
            deadline = waiting_since + (expiry_timeout_s if expiry_timeout_s is not None else 3 * retention_s + 60)
            held = set(expected)
            while held and time.perf_counter() < deadline:
                time.sleep(min(1.0, max(0.1, retention_s / 10)))
                held = remaining_jobs(clients["dynamodb"], jobs_table, held)
            expiry_wait_s = time.perf_counter() - waiting_since
            expired = set(expected) - held
            missing = check_archive(sink.directory.root, expected, expired)
    archived = len(expired) - len(missing)
    reads = requests.counts["Query jobs"] + requests.counts["Query outbox"]
    per_job = max(1, under_test.tally.archived)
    return {
        "jobs": jobs, "tenants": tenants, "retention_scale": scale, "job_retention_s": retention_s,
        "states": dict(Counter(want.state for want in expected.values())),
        "attempts": sum(want.attempts for want in expected.values()),
        "expired": len(expired), "archived": archived, "missing": len(missing), "missing_jobs": missing[:10],
        "not_expired": len(held),
        "archiver": {k: v for k, v in asdict(under_test.tally).items() if k != "expired_jobs"},
        "archiver_requests": dict(sorted(requests.counts.items())),
        "read_requests_per_archived_job": round(reads / per_job, 3),
        "jobs_table_queries_per_archived_job": round(requests.counts["Query jobs"] / per_job, 3),
        "outbox_queries_per_archived_job": round(requests.counts["Query outbox"] / per_job, 3),
        "batches": under_test.batches, "sink_writes": sink.writes,
        "sink_writes_per_batch": round(sink.writes / max(1, under_test.batches), 3),
        "sink_writes_per_job": round(sink.writes / per_job, 4),
        "parquet_bytes_per_job": round(sink.parquet_bytes / per_job, 1),
        "firehose_json_bytes_per_job": round(sink.firehose_json_bytes / per_job, 1),
        "firehose_billed_bytes_per_job": round(sink.firehose_billed_bytes / per_job, 1),
        "run_s": round(ran_s, 1), "expiry_wait_s": round(expiry_wait_s, 1),
    }


def report(r: dict[str, Any]) -> str:
    states = ", ".join(f"{count} {state}" for state, count in sorted(r["states"].items()))
    return "\n".join([
        f"{r['jobs']} jobs of {r['tenants']} tenants ({states}; {r['attempts']} attempts), job retention "
        f"{r['job_retention_s']} s (scale {r['retention_scale']:.3g}); ran in {r['run_s']} s, expired within "
        f"{r['expiry_wait_s']} s more",
        f"  expired {r['expired']}, archived at their final version with every run {r['archived']}, "
        f"missing {r['missing']}" + (f" {r['missing_jobs']}" if r["missing"] else "")
        + (f"; {r['not_expired']} not expired in time" if r["not_expired"] else ""),
        f"  archiver reads: {r['read_requests_per_archived_job']} requests per archived job "
        f"({r['jobs_table_queries_per_archived_job']} Query of the jobs table, "
        f"{r['outbox_queries_per_archived_job']} of the outbox); all: {r['archiver_requests']}",
        f"  sink: {r['sink_writes']} writes for {r['batches']} batches ({r['sink_writes_per_batch']} per batch, "
        f"{r['sink_writes_per_job']} per job)",
        f"  bytes per job: Parquet {r['parquet_bytes_per_job']}, Firehose JSON {r['firehose_json_bytes_per_job']} "
        f"(billed {r['firehose_billed_bytes_per_job']}, each record rounded up to 5 KB)",
        f"  archiver tally: {r['archiver']}",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--tenants", type=int, default=4)
    parser.add_argument("--retention-s", type=float, default=10.0,
                        help="seconds a finished job's items live on the scaled endpoint (default 10)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the lines")
    args = parser.parse_args(argv)
    for service in ("onward-relay", "onward-projector", "onward-archiver"):  # their per-batch INFO lines
        logging.getLogger(service).setLevel(logging.WARNING)
    if args.jobs < 1 or args.tenants < 1 or args.retention_s <= 0:
        parser.error("--jobs and --tenants must be at least 1, --retention-s above 0")
    result = run(args.jobs, args.tenants, args.retention_s)
    print(json.dumps(result) if args.json else report(result))
    return 1 if result["missing"] or result["not_expired"] else 0


if __name__ == "__main__":
    sys.exit(main())
