"""AthenaArchive against botocore's Stubber: the requests it sends (parameters, workgroup, polling, pages) and
how it reads Athena's answers (typed cells, nested runs as JSON, failures as the engine's message)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from onward.domain.archive import ArchivedJob
from onward.operator.history.questions import RETRIES, day_window
from onward.operator.history.readers import ArchiveQueryError, AthenaArchive, archive_reader
from onward.settings import ArchiveSettings
from tests.unit.operator.archive_samples import job_id, record

pytestmark = pytest.mark.fast


@pytest.fixture
def athena() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("athena", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def _status(stubber: Stubber, state: str, **extra: Any) -> None:
    stubber.add_response("get_query_execution", {"QueryExecution": {"Status": {"State": state, **extra}}},
                         {"QueryExecutionId": "q1"})


def _page(columns: list[tuple[str, str]], rows: list[list[str | None]], *, header: bool,
          token: str | None = None) -> dict[str, Any]:
    cells = [[{} if value is None else {"VarCharValue": value} for value in row] for row in rows]
    if header:
        cells.insert(0, [{"VarCharValue": name} for name, _ in columns])
    page: dict[str, Any] = {"ResultSet": {
        "Rows": [{"Data": row} for row in cells],
        "ResultSetMetadata": {"ColumnInfo": [{"Name": name, "Type": kind} for name, kind in columns]}}}
    if token:
        page["NextToken"] = token
    return page


def test_a_question_runs_with_execution_parameters_polls_with_backoff_and_reads_every_page(
        athena: tuple[Any, Stubber]) -> None:
    """The window's days go as quoted execution parameters (never into the text); without the backoff the
    pauses would be equal; without pagination the second page's row would be lost; cells are typed by
    the column's type."""
    client, stubber = athena
    pauses: list[float] = []
    reader = AthenaArchive(client, "onward_archive", "jobs", "onward", sleep=pauses.append)
    stubber.add_response("start_query_execution", {"QueryExecutionId": "q1"}, {
        "QueryString": RETRIES.sql.replace("{source}", '"onward_archive"."jobs"'),
        "QueryExecutionContext": {"Database": "onward_archive"}, "WorkGroup": "onward",
        "ExecutionParameters": ["'2025-12-01'", "'2025-12-31'"]})
    _status(stubber, "QUEUED")
    _status(stubber, "RUNNING")
    _status(stubber, "SUCCEEDED")
    columns = [("type", "varchar"), ("jobs", "bigint"), ("dead_share", "double")]
    stubber.add_response("get_query_results", _page(columns, [["demo.echo", "4", "0.25"]], header=True, token="t2"),
                         {"QueryExecutionId": "q1"})
    stubber.add_response("get_query_results", _page(columns, [["demo.sleep", "1", None]], header=False),
                         {"QueryExecutionId": "q1", "NextToken": "t2"})
    table = reader.sql(RETRIES.sql, day_window("2025-12-01", "2025-12-31"))
    assert table.records() == [{"type": "demo.echo", "jobs": 4, "dead_share": 0.25},
                               {"type": "demo.sleep", "jobs": 1, "dead_share": None}]
    assert len(pauses) == 2 and pauses[1] > pauses[0]


def test_a_job_is_read_with_its_runs_and_scoped_to_its_tenant(athena: tuple[Any, Stubber]) -> None:
    """The tenant is a parameter of the query (another tenant's job: no row, None); runs come back as JSON,
    as objects or (a ROW cast as an array) in field order, and both read back as the record's runs."""
    client, stubber = athena
    reader = AthenaArchive(client, "onward_archive", "jobs", sleep=lambda _: None)
    archived = record(job_id(7), attempts=2)
    values = archived.model_dump()
    as_arrays = [list(run.values()) for run in values["runs"]]
    columns = [(name, "bigint" if isinstance(values[name], int) and not isinstance(values[name], bool)
                else "boolean" if isinstance(values[name], bool) else "varchar") for name in ArchivedJob.model_fields]
    cells = [json.dumps(as_arrays) if name == "runs" else json.dumps(values[name]) if name == "events"
             else None if values[name] is None else str(values[name]).lower() if isinstance(values[name], bool)
             else str(values[name]) for name in ArchivedJob.model_fields]
    stubber.add_response("start_query_execution", {"QueryExecutionId": "q1"}, {
        "QueryString": ANY, "QueryExecutionContext": {"Database": "onward_archive"},
        "ExecutionParameters": [f"'{job_id(7)}'", "'acme'"]})
    _status(stubber, "SUCCEEDED")
    stubber.add_response("get_query_results", _page(columns, [cells], header=True), {"QueryExecutionId": "q1"})
    assert reader.job(job_id(7), "acme") == archived

    stubber.add_response("start_query_execution", {"QueryExecutionId": "q1"}, {
        "QueryString": ANY, "QueryExecutionContext": {"Database": "onward_archive"},
        "ExecutionParameters": [f"'{job_id(7)}'", "'other'"]})
    _status(stubber, "SUCCEEDED")
    stubber.add_response("get_query_results", _page(columns, [], header=True), {"QueryExecutionId": "q1"})
    assert reader.job(job_id(7), "other") is None

    stubber.add_response("start_query_execution", {"QueryExecutionId": "q1"}, {
        "QueryString": ANY, "QueryExecutionContext": {"Database": "onward_archive"},
        "ExecutionParameters": [f"'{job_id(7)}'", "'acme'", "'2025-12-01'", "'2025-12-03'"]})
    _status(stubber, "SUCCEEDED")
    stubber.add_response("get_query_results", _page(columns, [], header=True), {"QueryExecutionId": "q1"})
    assert reader.job(job_id(7), "acme", ("2025-12-01", "2025-12-03")) is None  # the days prune partitions


def test_a_quote_in_a_value_stays_inside_its_literal(athena: tuple[Any, Stubber]) -> None:
    """Without the doubling, a tenant id with a quote would end the literal and become SQL."""
    client, stubber = athena
    reader = AthenaArchive(client, "db", "jobs", sleep=lambda _: None)
    stubber.add_response("start_query_execution", {"QueryExecutionId": "q1"}, {
        "QueryString": ANY, "QueryExecutionContext": {"Database": "db"},
        "ExecutionParameters": ["'x'", "'a'' OR ''1''=''1'"]})
    _status(stubber, "SUCCEEDED")
    stubber.add_response("get_query_results", _page([("job_id", "varchar")], [], header=True),
                         {"QueryExecutionId": "q1"})
    assert reader.sql("SELECT job_id FROM {source} WHERE job_id = ? AND tenant = ?", ["x", "a' OR '1'='1"]).rows == []


def test_failures_are_the_engines_message(athena: tuple[Any, Stubber]) -> None:
    client, stubber = athena
    reader = AthenaArchive(client, "db", "jobs", sleep=lambda _: None, max_wait_s=0.5, first_poll_s=0.2)
    stubber.add_client_error("start_query_execution", "InvalidRequestException",
                             "line 1:8: Column 'nope' cannot be resolved")
    with pytest.raises(ArchiveQueryError, match="cannot be resolved"):
        reader.user_sql("SELECT nope FROM jobs")
    stubber.add_response("start_query_execution", {"QueryExecutionId": "q1"})
    _status(stubber, "FAILED", AthenaError={"ErrorCategory": 2, "ErrorMessage": "TABLE_NOT_FOUND: jobs"})
    with pytest.raises(ArchiveQueryError, match="TABLE_NOT_FOUND"):
        reader.sql("SELECT 1 FROM {source}")
    stubber.add_response("start_query_execution", {"QueryExecutionId": "q1"})
    for _ in range(3):  # polls after 0, 0.2 and 0.6 s of pauses: past 0.5 s, stopped
        _status(stubber, "RUNNING")
    stubber.add_response("stop_query_execution", {}, {"QueryExecutionId": "q1"})
    with pytest.raises(ArchiveQueryError, match="stopped"):
        reader.sql("SELECT 1 FROM {source}")


def test_the_settings_choose_the_engine() -> None:
    assert archive_reader(ArchiveSettings(), lambda: None) is None
    local = archive_reader(ArchiveSettings(directory="/tmp/archive"), lambda: None)
    assert local is not None and local.engine == "duckdb"
    remote = archive_reader(ArchiveSettings(directory="/x", database="db", table="jobs"), object)
    assert remote is not None and remote.engine == "athena"
    with pytest.raises(ValueError, match="A-Za-z0-9_"):
        AthenaArchive(object(), 'db"; DROP', "jobs")
