"""bench/archive_cost.py's arithmetic: Firehose bills each record rounded up to 5 KB, objects follow the
tenants and the buffer interval, storage is a month STANDARD, two STANDARD_IA and nine GLACIER_IR, a query pays
for 10 MB at least; and docs/archive.md shows this module's figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import archive_cost
from bench.archive_cost import GB, MILLION, PRICES_USD, Measured, bill, objects_per_million, query_costs, total

MEASURED = Measured(json_bytes_per_record=2_000, billed_bytes_per_record=5_120, parquet_bytes_per_record=500,
                    column_bytes_per_record={"job_id": 40.0, "version": 2.0, "archived_ms": 4.0, "runs": 100.0,
                                             "events": 150.0, "tenant": 1.0, "type": 1.0})


def test_firehose_bills_every_record_as_5_kb_at_least() -> None:
    """Breaks if ingestion were priced on the JSON's own bytes: a 2 KB record costs as much as a 5 KB one."""
    records = archive_cost.sample_records(8)
    measured = archive_cost.measure(records)
    assert measured.json_bytes_per_record < 5 * 1024
    assert measured.billed_bytes_per_record == 5 * 1024
    assert measured.parquet_bytes_per_record > 0  # (8 records in 8 files: mostly Parquet's footers here)
    assert {"job_id", "runs", "events"} <= set(measured.column_bytes_per_record)


def test_each_line_is_its_quantity_times_its_price_and_the_total_their_sum() -> None:
    lines = {line.item: line for line in bill(MEASURED, jobs_per_second=100, tenants=50)}
    ingestion = lines["Firehose ingestion (5 KB per record)"]
    assert ingestion.quantity == pytest.approx(5_120 * MILLION / GB)
    assert ingestion.usd == pytest.approx(ingestion.quantity * PRICES_USD["firehose_ingestion_gb"])
    parquet_gb = 500 * MILLION / GB
    assert lines["S3 storage, GLACIER_IR, 9 month(s)"].quantity == pytest.approx(9 * parquet_gb)
    assert lines["S3 storage, STANDARD, 1 month(s)"].usd == pytest.approx(parquet_gb * 0.023)
    assert total(list(lines.values())) == pytest.approx(sum(line.usd for line in lines.values()))


def test_objects_are_one_per_tenant_per_buffer_interval() -> None:
    """A million jobs at 100/s take 10,000 s: 11.1 intervals of 900 s, 50 tenants each: 555.6 objects; twice the
    tenants, twice the objects; twice the rate, half."""
    assert objects_per_million(100, 50) == pytest.approx(50 * MILLION / (100 * 900))
    assert objects_per_million(100, 100) == pytest.approx(2 * objects_per_million(100, 50))
    assert objects_per_million(200, 50) == pytest.approx(objects_per_million(100, 50) / 2)


def test_a_query_pays_for_the_columns_it_reads_and_10_mb_at_least() -> None:
    queries = query_costs(MEASURED, jobs_in_month=MILLION)
    scanned, usd = queries["a job's attempts"]
    assert scanned == pytest.approx((40 + 2 + 4 + 100 + 150) * MILLION)
    assert usd == pytest.approx(scanned / 1024**4 * 5.0)
    assert queries["retry and poison rates per type"][0] == 10 * 1024**2  # Athena's minimum


def test_the_docs_show_the_benchs_prices() -> None:
    """docs/archive.md's table quotes these prices: change one here and the page must follow."""
    page = (Path(__file__).parents[3] / "docs" / "archive.md").read_text()
    for key in ("firehose_ingestion_gb", "firehose_conversion_gb", "firehose_partitioning_gb", "s3_standard_gb_month",
                "s3_standard_ia_gb_month", "s3_glacier_ir_gb_month", "athena_tb_scanned"):
        assert f"{PRICES_USD[key]:g}" in page, key
