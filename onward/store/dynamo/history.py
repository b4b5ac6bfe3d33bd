"""What the archive reads of a finished job (onward.pipeline.archive.archiver), and only that: its partition of
the jobs table in one strongly consistent Query (row and run records are kept together under `JOB#<id>`: the
completing run holds the result, and a result item written before issue 34 is there too,
onward.store.dynamo.keys) and its events, one Query of the outbox. Reads only: the archiver's role grants
Query on the jobs table and on the outbox, nothing else (template.yaml's ArchiverRole)."""

from __future__ import annotations

from typing import Any

from onward.domain.models import Job, OutboxEvent, Run
from onward.pipeline.outbox import OutboxReader
from onward.store.dynamo.attributes import Item, from_item
from onward.store.dynamo.keys import JOB_SK, RESULT_SK, RUN_PREFIX, job_pk
from onward.store.dynamo.results import result_of
from onward.store.dynamo.writes import job_from_item, run_from_item
from onward.store.ports.rows import JobHistory


class DynamoJobHistory:
    def __init__(self, client: Any, jobs_table: str, outbox_table: str) -> None:
        self._db = client
        self._jobs = jobs_table
        self._outbox = OutboxReader(client, outbox_table)

    def history(self, job_id: str) -> JobHistory | None:
        """The job's row, run records (attempt order) and result; None when its row is gone. One Query (more
        pages only past 1 MB: a large result)."""
        pages = self._db.get_paginator("query").paginate(
            TableName=self._jobs,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": job_pk(job_id)}},
            ConsistentRead=True,
        )
        job: Job | None = None
        runs: list[Run] = []
        last_run: Item | None = None  # (sort keys in attempt order: the last one read)
        old_result: Item | None = None
        for page in pages:
            for item in page["Items"]:
                sk = item["sk"]["S"]
                if sk == JOB_SK:
                    job = job_from_item(item)[0]
                elif sk.startswith(RUN_PREFIX):
                    runs.append(run_from_item(item))
                    last_run = item
                elif sk == RESULT_SK:
                    old_result = item
        if job is None:
            return None
        return JobHistory(job, sorted(runs, key=lambda run: run.attempt), result_of(
            None if last_run is None else from_item(last_run), None if old_result is None else from_item(old_result)))

    def events(self, job_id: str) -> list[OutboxEvent]:
        """The job's outbox events in version order (one Query)."""
        return self._outbox.events_of(job_id)
