"""The archive as Parquet files in a directory (the local stack's archive, under its data directory), laid out
as on S3: `<root>/jobs/day=<YYYY-MM-DD>/tenant=<tenant>/part-<uuid>.parquet`, every file holding every column
of onward.domain.archive.ArchivedJob (`day` too, so a reader needs no Hive partitioning to see it).

A file appears whole or not at all: DuckDB writes a batch under `<root>/.incoming/<batch>/`, and each file is
then renamed into place (a crash in between leaves only `.incoming/`, which no reader globs and a later write
clears once it is STALE_INCOMING_S old: writes run at once, from several shards' batches, and none clears
another's batch in flight). Writing the same record twice is harmless: readers take the newest version of each job
(onward.domain.archive.LATEST_VERSIONS)."""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from onward.domain.archive import ArchivedEvent, ArchivedJob, ArchivedRun, glue_columns

JOBS = "jobs"
INCOMING = ".incoming"
STALE_INCOMING_S = 600.0  # a batch directory this old under .incoming/ is a crashed write's: removed

_SCALARS = {"bigint": "BIGINT", "string": "VARCHAR", "boolean": "BOOLEAN"}


def duckdb_type(hive: str) -> str:
    """A Glue (Hive) column type as DuckDB spells it: `array<struct<a:bigint>>` -> `STRUCT("a" BIGINT)[]`."""
    if hive in _SCALARS:
        return _SCALARS[hive]
    if hive.startswith("array<") and hive.endswith(">"):
        return duckdb_type(hive[len("array<"):-1]) + "[]"
    if hive.startswith("struct<") and hive.endswith(">"):
        fields = re.findall(r"(\w+):((?:array<[^>]*>)|\w+)", hive[len("struct<"):-1])
        return "STRUCT(" + ", ".join(f'"{name}" {duckdb_type(kind)}' for name, kind in fields) + ")"
    raise ValueError(f"no DuckDB type for {hive}")


# The archive's columns as DuckDB declares them, `day` last (the partition key is a column of every file too).
COLUMNS: list[tuple[str, str]] = [(name, duckdb_type(kind)) for name, kind in glue_columns()] + [("day", "VARCHAR")]


def _row(record: ArchivedJob) -> list[Any]:
    values = record.model_dump()
    return [values[name] for name, _ in COLUMNS]


class ParquetDirectory:
    """The archive under `root`: write batches of records, and the glob that reads them back."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def jobs_glob(self, day: str = "*", tenant: str = "*") -> str:
        """The files of one day and tenant (`*` for every one), for read_parquet."""
        return str(self.root / JOBS / f"day={day}" / f"tenant={tenant}" / "*.parquet")

    def source(self, day: str = "*", tenant: str = "*") -> str:
        """The SQL table expression reading those files: every column from the files themselves (`day` too:
        DuckDB would otherwise read `day=` in the path as a DATE), by name, so files of older schemas read on."""
        glob = self.jobs_glob(day, tenant).replace("'", "''")
        return f"read_parquet('{glob}', hive_partitioning = false, union_by_name = true)"

    def has_files(self) -> bool:
        return any((self.root / JOBS).glob("day=*/tenant=*/*.parquet"))

    def write(self, records: Sequence[ArchivedJob]) -> int:
        """Write the records, one new file per (day, tenant) among them; returns the bytes written."""
        if not records:
            return 0
        import duckdb  # only where the archive is a directory: the Lambda functions never import it

        incoming = self.root / INCOMING
        _clear_stale(incoming)
        batch = incoming / uuid.uuid4().hex
        batch.mkdir(parents=True)
        with duckdb.connect() as db:
            db.execute("CREATE TABLE archived (" + ", ".join(f'"{n}" {t}' for n, t in COLUMNS) + ")")
            db.executemany(f"INSERT INTO archived VALUES ({', '.join('?' for _ in COLUMNS)})",
                           [_row(record) for record in records])
            target_dir = str(batch).replace("'", "''")
            db.execute(f"COPY archived TO '{target_dir}' (FORMAT parquet, PARTITION_BY (day, tenant), "
                       "WRITE_PARTITION_COLUMNS true, FILENAME_PATTERN 'part-{uuid}')")
        written = 0
        for path in batch.rglob("*.parquet"):
            target = self.root / JOBS / path.relative_to(batch)
            target.parent.mkdir(parents=True, exist_ok=True)
            written += path.stat().st_size
            os.replace(path, target)
        shutil.rmtree(batch, ignore_errors=True)
        return written


def _clear_stale(incoming: Path) -> None:
    """Remove crashed writes' leftovers (never read): batch directories older than STALE_INCOMING_S."""
    if not incoming.is_dir():
        return
    cutoff = time.time() - STALE_INCOMING_S
    for leftover in incoming.iterdir():
        try:
            if leftover.stat().st_mtime < cutoff:
                shutil.rmtree(leftover, ignore_errors=True)
        except FileNotFoundError:
            continue  # another write's, moved into place meanwhile


def record_of(row: dict[str, Any]) -> ArchivedJob:
    """A record read back from a file (a row of read_parquet as a dict)."""
    values = {name: row[name] for name in ArchivedJob.model_fields}
    values["runs"] = [ArchivedRun(**run) for run in values["runs"] or []]
    values["events"] = [ArchivedEvent(**event) for event in values["events"] or []]
    return ArchivedJob(**values)
