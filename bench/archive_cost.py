"""What the run-history archive costs on AWS per million jobs, from measured bytes per record, at list prices.

    .venv/bin/python -m bench.archive_cost [--jobs-per-second 100] [--tenants 50] [--json]

Records are built with onward.domain.archive.archived_job for realistic jobs (1 and 3 attempts, a small and a
1 KB result, a quarter each) and measured: the JSON line the sink sends (onward.pipeline.archive.firehose.encode)
and the Parquet bytes per record and per column of the same records written by the local archive (DuckDB's
Parquet, SNAPPY, as Firehose writes it). Then, per million jobs:

- Firehose: ingestion and format conversion billed per record rounded up to 5 KB; dynamic partitioning per GB
  and per object delivered. Objects: one per (day, tenant) partition per 15-minute buffer while the tenant
  finishes jobs (template.yaml's ArchiveDeliveryStream), so they depend on the rate and the tenants: the options.
- S3: a PUT per object, lifecycle transitions (STANDARD_IA at 30 days, GLACIER_IR at 90) per object, storage
  for a year: a month STANDARD, two STANDARD_IA, nine GLACIER_IR.
- Athena: per query, the bytes of the columns it reads over a month of jobs, 10 MB at least.

docs/archive.md is this module's table with its arithmetic; tests/unit/bench/test_archive_cost.py checks it.
Prices: on-demand list prices of us-east-1 (PRICES_AS_OF), no free tier.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
from dataclasses import asdict, dataclass
from typing import Any

from onward.domain.archive import ArchivedJob, archived_job
from onward.domain.models import ErrorSummary, Job, OutboxEvent, Run
from onward.pipeline.archive.firehose import encode
from onward.pipeline.archive.parquet import ParquetDirectory

PRICES_AS_OF = "2026-12-04"
GB = 1024**3
TB = 1024**4
FIREHOSE_INCREMENT_BYTES = 5 * 1024  # ingestion and conversion bill each record rounded up to 5 KB
PRICES_USD = {
    "firehose_ingestion_gb": 0.029,  # Direct PUT, first 500 TB a month
    "firehose_conversion_gb": 0.018,  # JSON to Parquet, on the 5 KB-rounded ingested GB
    "firehose_partitioning_gb": 0.020,  # dynamic partitioning, per GB delivered
    "firehose_partitioning_object": 0.005 / 1000,  # per object delivered to S3
    "s3_put": 0.005 / 1000,
    "s3_transition_to_ia": 0.01 / 1000,
    "s3_transition_to_glacier_ir": 0.02 / 1000,
    "s3_standard_gb_month": 0.023,
    "s3_standard_ia_gb_month": 0.0125,
    "s3_glacier_ir_gb_month": 0.004,
    "athena_tb_scanned": 5.00,
}
ATHENA_MINIMUM_BYTES = 10 * 1024**2
MONTHS_BY_CLASS = {"s3_standard_gb_month": 1, "s3_standard_ia_gb_month": 2, "s3_glacier_ir_gb_month": 9}
BUFFER_INTERVAL_S = 900
MILLION = 1_000_000
SAMPLE_JOBS = 4_000
# The columns each ready-made question reads (onward history's, as the history helper writes them).
QUERY_COLUMNS = {
    "a job's attempts": ("job_id", "version", "archived_ms", "runs", "events"),
    "waiting vs running per tenant and type": ("tenant", "type", "waited_ms", "ran_ms"),
    "retry and poison rates per type": ("type", "state", "attempts"),
    "slowest jobs of a day": ("job_id", "tenant", "type", "ran_ms"),
}


def _job(n: int, attempts: int, result_bytes: int) -> tuple[Job, list[Run], Any, list[OutboxEvent]]:
    """A finished job as the authority holds it: `attempts` attempts (all but the last failed), its result."""
    job_id = f"{n:032x}"
    created = 1_764_800_000_000 + n * 37
    runs: list[Run] = []
    at = created + 250
    for attempt in range(1, attempts + 1):
        failed = attempt < attempts
        runs.append(Run(job_id=job_id, attempt=attempt, worker_id=f"worker-{n % 16}-{attempt}", claimed_at=at,
                        lease_expires_at=at + 30_000, finished_at=at + 1_800,
                        outcome="failed" if failed else "succeeded",
                        error=ErrorSummary.of("TimeoutError", "upstream did not answer within 30 s: "
                                              "GET /v1/reports/export?page=17") if failed else None))
        at += 1_800 + (2_000 * attempt if failed else 0)
    last_error = runs[-2].error if attempts > 1 else None
    job = Job(job_id=job_id, tenant_id=f"tenant-{n % 50}", type="reports.export", params={
        "report": "monthly-usage", "account": f"acct-{n % 997}", "format": "csv", "filters": {"region": "eu"}},
        state="succeeded", version=1 + 2 * attempts, attempt=attempts, max_attempts=3, not_before=created,
        last_outcome="succeeded", last_error=last_error, created_at=created, updated_at=at)
    # a 1 KB result of data that does not compress away (a repeated letter would, flattering Parquet)
    result: Any = ({"rows": 1_204, "url": f"s3://exports/{job_id}.csv"} if result_bytes < 1024
                   else {"rows": 1_204, "sample": random.Random(n).randbytes((result_bytes - 30) // 2).hex()})
    events = []
    version = 0
    for attempt in range(attempts + 1):
        states = ["queued"] if attempt == 0 else ["running", "retry_wait" if attempt < attempts else "succeeded"]
        for state in states:
            version += 1
            events.append(OutboxEvent.of(job.model_copy(update={
                "state": state, "version": version, "attempt": attempt,
                "updated_at": created + version * 900})))
    return job, runs, result, events


def sample_records(count: int = SAMPLE_JOBS) -> list[ArchivedJob]:
    """`count` records, a quarter of each kind: 1 or 3 attempts, a small or a 1 KB result."""
    kinds = [(1, 60), (1, 1024), (3, 60), (3, 1024)]
    records = []
    for n in range(count):
        attempts, result_bytes = kinds[n % len(kinds)]
        job, runs, result, events = _job(n, attempts, result_bytes)
        records.append(archived_job(job, runs, result, events, archived_at=job.updated_at + 86_400_000))
    return records


@dataclass(frozen=True)
class Measured:
    json_bytes_per_record: float  # the line the sink sends
    billed_bytes_per_record: float  # rounded up to Firehose's 5 KB increments
    parquet_bytes_per_record: float
    column_bytes_per_record: dict[str, float]


def measure(records: list[ArchivedJob]) -> Measured:
    lines = [encode(record) for record in records]
    billed = [math.ceil(len(line) / FIREHOSE_INCREMENT_BYTES) * FIREHOSE_INCREMENT_BYTES for line in lines]
    import duckdb

    with tempfile.TemporaryDirectory() as root:
        directory = ParquetDirectory(root)
        # one batch per (day, tenant) file, as Firehose writes one object per partition per buffer
        written = directory.write(records)
        rows = duckdb.sql(f"SELECT path_in_schema, sum(total_compressed_size) FROM parquet_metadata("
                          f"'{directory.jobs_glob()}') GROUP BY 1").fetchall()
    columns: dict[str, float] = {}
    for path, size in rows:
        top = str(path).split(".")[0].split(",")[0].strip()
        columns[top] = columns.get(top, 0.0) + float(size) / len(records)
    return Measured(json_bytes_per_record=sum(map(len, lines)) / len(records),
                    billed_bytes_per_record=sum(billed) / len(records),
                    parquet_bytes_per_record=written / len(records), column_bytes_per_record=columns)


@dataclass(frozen=True)
class Line:
    item: str
    quantity: float
    unit: str
    unit_price: float
    usd: float


def objects_per_million(jobs_per_second: float, tenants: int) -> float:
    """Objects Firehose delivers per million jobs: one per tenant per buffer interval (each tenant finishing
    jobs in each interval), never fewer than the 128 MB buffers the bytes fill."""
    intervals_per_million = MILLION / (jobs_per_second * BUFFER_INTERVAL_S)
    return tenants * intervals_per_million


def bill(measured: Measured, *, jobs_per_second: float = 100, tenants: int = 50) -> list[Line]:
    """The cost of a million jobs through the archive, line by line."""
    price = PRICES_USD
    billed_gb = measured.billed_bytes_per_record * MILLION / GB
    json_gb = measured.json_bytes_per_record * MILLION / GB
    parquet_gb = measured.parquet_bytes_per_record * MILLION / GB
    objects = max(objects_per_million(jobs_per_second, tenants), parquet_gb * 1024 / 128)

    def line(item: str, quantity: float, unit: str, key: str) -> Line:
        return Line(item, quantity, unit, price[key], quantity * price[key])

    lines = [
        line("Firehose ingestion (5 KB per record)", billed_gb, "GB", "firehose_ingestion_gb"),
        line("Firehose JSON to Parquet (5 KB per record)", billed_gb, "GB", "firehose_conversion_gb"),
        line("Firehose dynamic partitioning, bytes", json_gb, "GB", "firehose_partitioning_gb"),
        line("Firehose dynamic partitioning, objects", objects, "objects", "firehose_partitioning_object"),
        line("S3 PUT of those objects", objects, "requests", "s3_put"),
        line("S3 transitions to STANDARD_IA", objects, "requests", "s3_transition_to_ia"),
        line("S3 transitions to GLACIER_IR", objects, "requests", "s3_transition_to_glacier_ir"),
    ]
    labels = {"s3_standard_gb_month": "STANDARD", "s3_standard_ia_gb_month": "STANDARD_IA",
              "s3_glacier_ir_gb_month": "GLACIER_IR"}
    for key, months in MONTHS_BY_CLASS.items():
        lines.append(line(f"S3 storage, {labels[key]}, {months} month(s)", parquet_gb * months, "GB-months", key))
    return lines


def query_costs(measured: Measured, jobs_in_month: float = MILLION) -> dict[str, tuple[float, float]]:
    """Per ready-made question over a month holding `jobs_in_month` jobs: (bytes scanned, USD)."""
    found = {}
    for question, columns in QUERY_COLUMNS.items():
        scanned = max(ATHENA_MINIMUM_BYTES,
                      sum(measured.column_bytes_per_record.get(column, 0.0) for column in columns) * jobs_in_month)
        found[question] = (scanned, scanned / TB * PRICES_USD["athena_tb_scanned"])
    return found


def total(lines: list[Line]) -> float:
    return sum(line.usd for line in lines)


def markdown(measured: Measured, lines: list[Line], queries: dict[str, tuple[float, float]]) -> str:
    out = [f"Measured over {SAMPLE_JOBS:,} records: {measured.json_bytes_per_record:,.0f} bytes of JSON per record "
           f"(billed as {measured.billed_bytes_per_record:,.0f}), {measured.parquet_bytes_per_record:,.0f} bytes "
           "of Parquet.", "",
           "| item | quantity per million jobs | unit | unit price (USD) | USD |", "|---|---|---|---|---|"]
    out += [f"| {line.item} | {line.quantity:,.2f} | {line.unit} | {line.unit_price:g} | {line.usd:.4f} |"
            for line in lines]
    out += [f"| **total, a year kept** | | | | **{total(lines):.4f}** |", "",
            "| question over a month of 1,000,000 jobs | MB scanned | USD per query |", "|---|---|---|"]
    out += [f"| {question} | {scanned / 1024**2:,.1f} | {usd:.6f} |" for question, (scanned, usd) in queries.items()]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs-per-second", type=float, default=100)
    parser.add_argument("--tenants", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    measured = measure(sample_records())
    lines = bill(measured, jobs_per_second=args.jobs_per_second, tenants=args.tenants)
    queries = query_costs(measured)
    if args.json:
        json.dump({"measured": asdict(measured), "lines": [asdict(line) for line in lines], "total": total(lines),
                   "queries": queries}, sys.stdout, indent=2)
        print()
    else:
        print(markdown(measured, lines, queries))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
