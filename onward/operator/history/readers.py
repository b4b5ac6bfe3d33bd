"""Readers of the run-history archive: one protocol, two engines.

DuckDbArchive reads the local archive (Parquet files under a directory, onward.pipeline.archive.parquet) in an
in-memory DuckDB; AthenaArchive runs the same SQL in an Athena workgroup over the Glue table on AWS. Both answer
`sql(text, parameters) -> Table` for a query over `{source}` and `job(job_id, tenant) -> ArchivedJob | None` (the
job's newest archived version, only if it is that tenant's). Values always travel as parameters.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from onward.domain.archive import ArchivedEvent, ArchivedJob, ArchivedRun
from onward.operator.history.questions import job_lookup, over_jobs
from onward.pipeline.archive.parquet import ParquetDirectory, record_of
from onward.settings import ArchiveSettings

Value = str | int | float | bool | None
Parameter = str | int


@dataclass(frozen=True)
class Table:
    """A query's answer: its column names and rows."""

    columns: list[str]
    rows: list[tuple[Value, ...]]

    def records(self) -> list[dict[str, Value]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


class ArchiveQueryError(Exception):
    """The engine refused or failed the query; the message is the engine's own."""


class ArchiveReader(Protocol):
    engine: str

    def sql(self, text: str, parameters: Sequence[Parameter] = ()) -> Table:
        """Run `text` (SQL over `{source}`, `?` for each parameter)."""
        ...

    def job(self, job_id: str, tenant: str | None, days: tuple[str, str] | None = None) -> ArchivedJob | None:
        """The job's newest archived version; None if the archive has none of `tenant`'s (None: any tenant's).
        `days` (first, last; YYYY-MM-DD): only versions that finished then (Athena reads only those partitions)."""
        ...

    def user_sql(self, text: str) -> Table:
        """An operator's own query, in which `jobs` names the newest version of every job."""
        ...


# --- DuckDB over the local directory ---------------------------------------------------------------------------

# Trino's percentile function under its own name, so that one text of each question runs on both engines.
_DUCKDB_MACROS = ("CREATE MACRO approx_percentile(x, q) AS approx_quantile(x, q)",)


class DuckDbArchive:
    """The archive under a directory, read by DuckDB (imported on first use: the Lambda functions never do)."""

    engine = "duckdb"

    def __init__(self, root: Path | str) -> None:
        self.directory = ParquetDirectory(root)

    def _run(self, text: str, parameters: Sequence[Parameter], *, tenant: str = "*") -> Table:
        import duckdb

        if not self.directory.has_files():
            raise ArchiveQueryError(f"the archive at {self.directory.root} holds no files yet")
        query = text.replace("{source}", self.directory.source(tenant=tenant))
        with duckdb.connect() as db:
            for macro in _DUCKDB_MACROS:
                db.execute(macro)
            try:
                cursor = db.execute(query, list(parameters))
                columns = [column[0] for column in cursor.description or []]
                rows = [tuple(row) for row in cursor.fetchall()]
            except duckdb.Error as error:
                raise ArchiveQueryError(str(error)) from None
        return Table(columns, rows)

    def sql(self, text: str, parameters: Sequence[Parameter] = ()) -> Table:
        return self._run(text, parameters)

    def user_sql(self, text: str) -> Table:
        return self._run(over_jobs(text), ())

    def job(self, job_id: str, tenant: str | None, days: tuple[str, str] | None = None) -> ArchivedJob | None:
        query = job_lookup(scoped=tenant is not None, windowed=days is not None)
        parameters = [job_id, *([tenant] if tenant is not None else []), *(days or ())]
        if tenant is not None:
            # only that tenant's directories are read (its partition): no other tenant's file is opened
            if not any(Path(self.directory.root).glob(f"jobs/day=*/tenant={_glob_safe(tenant)}/*.parquet")):
                return None
            table = self._run(query, parameters, tenant=_glob_safe(tenant))
        else:
            if not self.directory.has_files():
                return None
            table = self._run(query, parameters)
        records = table.records()
        return record_of(records[0]) if records else None


def _glob_safe(tenant: str) -> str:
    """A tenant id as a glob matches only itself (ids are [A-Za-z0-9_.-]; anything else matches nothing)."""
    return tenant if re.fullmatch(r"[A-Za-z0-9_.-]+", tenant) else "\x00"


# --- Athena over the Glue table ---------------------------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z0-9_]{1,255}")
_FINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
_INTEGERS = {"tinyint", "smallint", "integer", "bigint"}
_DECIMALS = {"double", "float", "real", "decimal"}
_NESTED = ("runs", "events")


def _literal(value: Parameter) -> str:
    """An execution parameter as Athena takes it: a SQL literal (a string quoted, its quotes doubled)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"no Athena parameter for {value!r}")
    if isinstance(value, int):
        return str(value)
    return "'" + value.replace("'", "''") + "'"


def _value(cell: dict[str, str], kind: str) -> Value:
    if "VarCharValue" not in cell:
        return None
    text = cell["VarCharValue"]
    if kind in _INTEGERS:
        return int(text)
    if kind in _DECIMALS:
        return float(text)
    if kind == "boolean":
        return text == "true"
    return text


def _nested(text: Any, model: type[ArchivedRun | ArchivedEvent]) -> list[Any]:
    """Runs or events as json_format(CAST(... AS JSON)) writes them: objects by field name, or (engines that
    cast a ROW to a JSON array) arrays in the struct's field order, which is the model's."""
    items = json.loads(text) if isinstance(text, str) else []
    names = list(model.model_fields)
    return [model(**(item if isinstance(item, dict) else dict(zip(names, item, strict=False)))) for item in items]


@dataclass
class AthenaArchive:
    """The archive's Glue table, queried in an Athena workgroup (boto3 athena client)."""

    client: Any
    database: str
    table: str
    workgroup: str | None = None
    max_wait_s: float = 60.0
    first_poll_s: float = 0.2
    max_poll_s: float = 2.0
    sleep: Callable[[float], None] = field(default=time.sleep)
    engine: str = "athena"

    def __post_init__(self) -> None:
        for name in (self.database, self.table):
            if not _NAME.fullmatch(name):
                raise ValueError(f"an archive database or table is [A-Za-z0-9_], not {name!r}")

    @property
    def source(self) -> str:
        return f'"{self.database}"."{self.table}"'

    def sql(self, text: str, parameters: Sequence[Parameter] = ()) -> Table:
        return self._run(text.replace("{source}", self.source), parameters)

    def user_sql(self, text: str) -> Table:
        return self.sql(over_jobs(text))

    def job(self, job_id: str, tenant: str | None, days: tuple[str, str] | None = None) -> ArchivedJob | None:
        # Runs and events come back as JSON text (a nested column's plain text is not parseable)
        columns = ", ".join(f"json_format(CAST({name} AS JSON)) AS {name}" if name in _NESTED else name
                            for name in ArchivedJob.model_fields)
        query = job_lookup(scoped=tenant is not None, windowed=days is not None)
        parameters = [job_id, *([tenant] if tenant is not None else []), *(days or ())]
        records = self.sql(f"SELECT {columns} FROM ({query}) newest_version", parameters).records()
        if not records:
            return None
        row: dict[str, Any] = dict(records[0])
        row["runs"] = _nested(row["runs"], ArchivedRun)
        row["events"] = _nested(row["events"], ArchivedEvent)
        return ArchivedJob(**row)

    def _run(self, query: str, parameters: Sequence[Parameter]) -> Table:
        from botocore.exceptions import ClientError

        request: dict[str, Any] = {"QueryString": query, "QueryExecutionContext": {"Database": self.database}}
        if self.workgroup:
            request["WorkGroup"] = self.workgroup
        if parameters:
            request["ExecutionParameters"] = [_literal(value) for value in parameters]
        try:
            execution_id: str = self.client.start_query_execution(**request)["QueryExecutionId"]
        except ClientError as error:  # a syntax error is refused here (InvalidRequestException)
            raise ArchiveQueryError(error.response.get("Error", {}).get("Message", str(error))) from None
        self._wait(execution_id)
        return self._results(execution_id)

    def _wait(self, execution_id: str) -> None:
        waited, pause = 0.0, self.first_poll_s
        while True:
            status = self.client.get_query_execution(QueryExecutionId=execution_id)["QueryExecution"]["Status"]
            state = status["State"]
            if state == "SUCCEEDED":
                return
            if state in _FINAL:
                reason = status.get("AthenaError", {}).get("ErrorMessage") or status.get("StateChangeReason")
                raise ArchiveQueryError(reason or f"the query ended {state}")
            if waited >= self.max_wait_s:
                self.client.stop_query_execution(QueryExecutionId=execution_id)
                raise ArchiveQueryError(f"the query took over {self.max_wait_s:g} s and was stopped ({execution_id})")
            self.sleep(pause)
            waited += pause
            pause = min(pause * 2, self.max_poll_s)

    def _results(self, execution_id: str) -> Table:
        columns: list[str] = []
        kinds: list[str] = []
        rows: list[tuple[Value, ...]] = []
        request: dict[str, Any] = {"QueryExecutionId": execution_id}
        first_page = True
        while True:
            page = self.client.get_query_results(**request)
            result = page["ResultSet"]
            if first_page:
                info = result["ResultSetMetadata"]["ColumnInfo"]
                columns = [column["Name"] for column in info]
                kinds = [column["Type"].lower() for column in info]
            data = result["Rows"][1:] if first_page else result["Rows"]  # a SELECT's first row: the header
            rows.extend(tuple(_value(cell, kind) for cell, kind in zip(row["Data"], kinds, strict=True))
                        for row in data)
            first_page = False
            token = page.get("NextToken")
            if not token:
                return Table(columns, rows)
            request["NextToken"] = token


def archive_reader(settings: ArchiveSettings, athena_client: Callable[[], Any], *, max_wait_s: float = 60.0
                   ) -> ArchiveReader | None:
    """The archive the settings name (onward.settings.ArchiveSettings): Athena when a database and table are set,
    else the local directory, else None (no archive configured)."""
    if settings.database and settings.table:
        return AthenaArchive(athena_client(), settings.database, settings.table, settings.workgroup,
                             max_wait_s=max_wait_s)
    if settings.directory:
        return DuckDbArchive(settings.directory)
    return None
