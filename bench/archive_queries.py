"""Query time over a month of archived jobs: a job's history by id (tenant-scoped, as GET /jobs/{id} asks it)
and each ready-made question of `onward history`, on DuckDB over the local Parquet archive.

    .venv/bin/python -m bench.archive_queries [--days 30] [--jobs-per-day 1000] [--tenants 4] [--json]

It generates `days` x `jobs-per-day` finished jobs spread over `tenants` tenants (seeded: the same archive every
run), a few replayed and archived again at a newer version, written with ParquetDirectory.write in daily
batches (one file per day and tenant, as the archiver writes them), then times each query `repeats` times and
reports the median with the files and bytes it reads. Every lookup is checked against what was written (the
newest version, nothing for another tenant). Times are of a shared machine: compare them, do not assert them.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from onward.domain.archive import ArchivedEvent, ArchivedJob, ArchivedRun, utc_day
from onward.operator.history.questions import RETRIES, WAITS, day_window, slowest
from onward.operator.history.readers import DuckDbArchive
from onward.pipeline.archive.parquet import ParquetDirectory

DAY_MS = 86_400_000
FIRST_DAY_MS = 1_764_547_200_000  # 2025-12-01T00:00:00Z
TYPES = ("report.export", "mail.send", "image.resize")
REPLAYED_SHARE_OF_DEAD = 0.6  # dead jobs an operator replays: archived again at a newer version
ATHENA_USD_PER_TB = 5.0  # Athena's price per TB scanned (SQL queries), 10 MB minimum per query
ATHENA_MIN_BYTES = 10 * 1024 * 1024


@dataclass
class Written:
    jobs: int = 0
    versions: int = 0
    files: int = 0
    bytes: int = 0
    write_s: float = 0.0
    newest: dict[str, tuple[str, int]] = field(default_factory=dict)  # job id -> (tenant, newest version)


def _job(rng: random.Random, number: int, day: int, tenants: int, version: int = 1,
         after_ms: int = 0) -> ArchivedJob:
    tenant = f"tenant-{rng.randrange(tenants)}"
    created = max(after_ms, FIRST_DAY_MS + day * DAY_MS + rng.randrange(DAY_MS - 3_600_000))
    waited = int(rng.expovariate(1 / 2000))
    roll = rng.random()
    state = "dead" if roll < 0.03 else "quarantined" if roll < 0.04 else "succeeded"
    attempts = 3 if state != "succeeded" else rng.choices((1, 2, 3), (90, 8, 2))[0]
    runs, start = [], created + waited
    for attempt in range(1, attempts + 1):
        took = int(rng.expovariate(1 / 1500)) + 10
        failed = attempt < attempts or state != "succeeded"
        runs.append(ArchivedRun(attempt=attempt, worker_id=f"w-{rng.randrange(16)}", claimed_ms=start,
                                finished_ms=start + took, outcome="failed" if failed else "succeeded",
                                error_type="TimeoutError" if failed else None,
                                error_message="upstream took too long" if failed else None))
        start += took + 1000 * attempt
    finished = runs[-1].finished_ms or start
    return ArchivedJob(
        job_id=f"{number:032x}", tenant=tenant, type=TYPES[number % len(TYPES)], state=state, version=version,
        attempts=attempts, max_attempts=3, priority=0, created_ms=created, first_claim_ms=created + waited,
        finished_ms=finished, waited_ms=waited, ran_ms=sum((run.finished_ms or 0) - run.claimed_ms for run in runs),
        last_outcome=runs[-1].outcome, last_error_type=runs[-1].error_type,
        last_error_message=runs[-1].error_message, params_json=json.dumps({"n": number}),
        result_size_bytes=12, result_summary='{"ok":true}', runs=runs,
        events=[ArchivedEvent(version=v, status="queued" if v == 1 else "running", attempt=0,
                              occurred_at="2025-12-01T00:00:00.000Z") for v in range(1, version + 1)],
        archived_ms=finished + 60_000, day=utc_day(finished))


def generate(root: Path, days: int, jobs_per_day: int, tenants: int, seed: int = 36) -> Written:
    """A month (or `days`) of archived jobs under `root`, one ParquetDirectory.write per day."""
    rng = random.Random(seed)
    directory = ParquetDirectory(root)
    written = Written()
    number = 0
    for day in range(days):
        batch: list[ArchivedJob] = []
        for _ in range(jobs_per_day):
            number += 1
            record = _job(rng, number, day, tenants)
            batch.append(record)
            if record.state == "dead" and rng.random() < REPLAYED_SHARE_OF_DEAD:
                again = _job(random.Random(number), number, day, tenants, version=record.version + 3,
                             after_ms=record.finished_ms + 1)
                again = again.model_copy(update={"tenant": record.tenant})
                if again.day == record.day:
                    batch.append(again)
        started = time.perf_counter()
        written.bytes += directory.write(batch)
        written.write_s += time.perf_counter() - started
        written.versions += len(batch)
        for record in batch:
            known = written.newest.get(record.job_id)
            if known is None or record.version > known[1]:
                written.newest[record.job_id] = (record.tenant, record.version)
    written.jobs = len(written.newest)
    written.files = sum(1 for _ in (root / "jobs").glob("day=*/tenant=*/*.parquet"))
    return written


@dataclass(frozen=True)
class Timing:
    query: str
    median_ms: float
    runs: int
    rows: int
    athena_usd_at_most: float  # if Athena scanned every byte of the archive (a by-id lookup reads no less)


def _timed(name: str, repeats: int, total_bytes: int, query: Callable[[], int]) -> Timing:
    times, rows = [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        rows = query()
        times.append((time.perf_counter() - started) * 1000)
    scanned = max(ATHENA_MIN_BYTES, total_bytes)
    return Timing(name, round(statistics.median(times), 1), repeats, rows,
                  round(scanned / 1e12 * ATHENA_USD_PER_TB, 6))


def _sample(written: Written, count: int, seed: int) -> Iterator[tuple[str, str, int]]:
    rng = random.Random(seed)
    ids = sorted(written.newest)
    for job_id in rng.sample(ids, min(count, len(ids))):
        tenant, version = written.newest[job_id]
        yield job_id, tenant, version


def measure(root: Path, written: Written, days: int, repeats: int = 5) -> list[Timing]:
    archive = DuckDbArchive(root)
    first, last = utc_day(FIRST_DAY_MS), utc_day(FIRST_DAY_MS + (days - 1) * DAY_MS)
    lookups = list(_sample(written, repeats, seed=7))
    turn = iter(lookups * 2)

    def job_by_id() -> int:
        job_id, tenant, version = next(turn)
        found = archive.job(job_id, tenant)
        if found is None or found.version != version or found.tenant != tenant:
            raise AssertionError(f"{job_id}: archived as version {version} of {tenant}, read {found}")
        other = f"{tenant}-not" if not tenant.endswith("-not") else "x"
        if archive.job(job_id, other) is not None:
            raise AssertionError(f"{job_id} answered for another tenant")
        return 1

    month = day_window(first, last)
    middle = utc_day(FIRST_DAY_MS + (days // 2) * DAY_MS)
    return [
        _timed("job history by id (tenant-scoped) + another tenant's miss", len(lookups), written.bytes, job_by_id),
        _timed("waits per tenant and type, whole range", repeats, written.bytes,
               lambda: len(archive.sql(WAITS.sql, month).rows)),
        _timed("retry and poison rates per type, whole range", repeats, written.bytes,
               lambda: len(archive.sql(RETRIES.sql, month).rows)),
        _timed("slowest 10 jobs of one day", repeats, written.bytes,
               lambda: len(archive.sql(slowest(10).sql, [middle, middle]).rows)),
        _timed("sql: jobs per state (newest versions)", repeats, written.bytes,
               lambda: len(archive.user_sql("SELECT state, count(*) FROM jobs GROUP BY state").rows)),
    ]


def run(days: int = 30, jobs_per_day: int = 1000, tenants: int = 4, repeats: int = 5,
        root: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="onward-archive-bench-") as scratch:
        where = root or Path(scratch)
        written = generate(where, days, jobs_per_day, tenants)
        timings = measure(where, written, days, repeats)
    return {"days": days, "jobs_per_day": jobs_per_day, "tenants": tenants, "jobs": written.jobs,
            "versions": written.versions, "files": written.files, "bytes": written.bytes,
            "bytes_per_version": round(written.bytes / max(1, written.versions), 1),
            "write_s": round(written.write_s, 2), "queries": [asdict(timing) for timing in timings]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--jobs-per-day", type=int, default=1000)
    parser.add_argument("--tenants", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.days, args.jobs_per_day, args.tenants, args.repeats)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['jobs']} jobs ({result['versions']} archived versions) over {result['days']} days and "
          f"{result['tenants']} tenants: {result['files']} files, {result['bytes']:,} bytes "
          f"({result['bytes_per_version']} per version), written in {result['write_s']} s")
    for timing in result["queries"]:
        print(f"  {timing['query']:<60} median {timing['median_ms']:>8.1f} ms over {timing['runs']} runs "
              f"({timing['rows']} rows; on Athena at most ${timing['athena_usd_at_most']:.6f} a query)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
