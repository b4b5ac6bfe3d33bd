"""A job's run records as its readers see them, from one Query of its partition (issue 34: the claim writes no
run record): the closed records as stored, and the attempt the job row says runs built from the row, merged
with a partial record holding only its progress or overlap marks, if one was written before its close."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from onward.domain.models import Run
from onward.store.dynamo.attributes import Item, from_item
from onward.store.dynamo.epoch_stamps import row_of
from onward.store.dynamo.keys import JOB_SK, RUN_PREFIX, job_pk, run_from_values, run_item
from onward.store.ports.rows import JobRow

WORKER_ATTRIBUTE = "worker_id"  # every whole run record has it; a partial one (progress, overlap marks) has not


def partition_items(db: Any, table: str, job_id: str) -> Iterable[Item]:
    """Every item of the job's partition (row, run records, an old result item), consistently, in key order."""
    pages = db.get_paginator("query").paginate(
        TableName=table, KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": job_pk(job_id)}}, ConsistentRead=True)
    return (item for page in pages for item in page["Items"])


def runs_of_items(items: Iterable[Item]) -> tuple[JobRow | None, list[Run]]:
    """The job row of a partition's items and its runs in attempt order (see the module's docstring)."""
    row: JobRow | None = None
    stored: dict[int, dict[str, Any]] = {}
    for item in items:
        sk = item["sk"]["S"]
        if sk == JOB_SK:
            row = row_of(item)
        elif sk.startswith(RUN_PREFIX):
            stored[int(sk[len(RUN_PREFIX):])] = from_item(item)
    return row, merged_runs(None if row is None else row.open_run(), stored)


def merged_runs(running: Run | None, stored: dict[int, dict[str, Any]]) -> list[Run]:
    """The stored records (plain values, by attempt) with the running attempt's run (from its row) merged into
    its partial record; a partial record of no running attempt (none is written) is left out."""
    runs: dict[int, Run] = {}
    for attempt, values in stored.items():
        if WORKER_ATTRIBUTE in values:
            runs[attempt] = run_from_values(values)
        elif running is not None and running.attempt == attempt:
            runs[attempt] = run_from_values(run_item(running) | values)
    if running is not None and running.attempt not in runs:
        runs[running.attempt] = running
    return [runs[attempt] for attempt in sorted(runs)]
