"""What the archive reads of a finished job (onward.pipeline.archive.archiver), and only that: its partition of
the jobs table in one strongly consistent Query (row and run records are kept together under `JOB#<id>`: the
completing run holds the result, and a result item written before issue 34 is there too,
onward.store.dynamo.keys) and its events, one Query of the outbox. Reads only: the archiver's role grants
Query on the jobs table and on the outbox, nothing else (template.yaml's ArchiverRole)."""

from __future__ import annotations

from typing import Any

from onward.domain.models import OutboxEvent
from onward.pipeline.outbox import OutboxReader
from onward.store.dynamo.attributes import from_item
from onward.store.dynamo.keys import RESULT_SK, RUN_PREFIX
from onward.store.dynamo.results import result_of
from onward.store.dynamo.run_reads import partition_items, runs_of_items
from onward.store.ports.rows import JobHistory


class DynamoJobHistory:
    def __init__(self, client: Any, jobs_table: str, outbox_table: str) -> None:
        self._db = client
        self._jobs = jobs_table
        self._outbox = OutboxReader(client, outbox_table)

    def history(self, job_id: str) -> JobHistory | None:
        """The job's row, run records (attempt order) and result; None when its row is gone. One Query (more
        pages only past 1 MB: a large result)."""
        items = list(partition_items(self._db, self._jobs, job_id))
        row, runs = runs_of_items(items)  # (the running attempt's run from the row, as every reader of runs)
        if row is None:
            return None
        run_items = [item for item in items if item["sk"]["S"].startswith(RUN_PREFIX)]
        last_run = run_items[-1] if run_items else None  # (sort keys in attempt order: the last one read)
        old_result = next((item for item in items if item["sk"]["S"] == RESULT_SK), None)
        return JobHistory(row.job, runs, result_of(
            None if last_run is None else from_item(last_run), None if old_result is None else from_item(old_result)))

    def events(self, job_id: str) -> list[OutboxEvent]:
        """The job's outbox events in version order (one Query)."""
        return self._outbox.events_of(job_id)
