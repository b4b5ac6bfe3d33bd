"""The job store's backends as the tests see them: a recorder (DynamoDB on the embedded endpoint, or in
memory), JobStores over it (several share one backend, as several processes share one deployment), and a
raw view of everything it holds as DynamoDB items, read behind the store's back (the checks of atomicity
compare it).

tests/conftest.py's `store_backend` fixture gives each test one of each kind: the in-memory one needs no
AWS (fast tier), the DynamoDB one is marked `integration`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from onward.domain.retention import RetentionPolicy
from onward.operator.overlaps import OverlapIndex
from onward.settings import DAY_S, DEFAULT_JOB_RETENTION_DAYS, DEFAULT_OUTBOX_RETENTION_DAYS, Settings
from onward.store.dynamo.attributes import from_item, to_attribute
from onward.store.dynamo.keys import (
    RESULT_ATTRIBUTE,
    RESULT_SIZE_ATTRIBUTE,
    RESULT_SK,
    RUN_CLAIMED_AT,
    RUN_LEASE_EXPIRES_AT,
    Entity,
    Key,
    job_key,
    job_pk,
    run_item,
)
from onward.store.dynamo.overlap_index import DynamoOverlapIndex
from onward.store.dynamo.recorder import DynamoRecorder
from onward.store.dynamo.writes import wire_item, wire_key
from onward.store.memory.recorder import MemoryRecorder
from onward.store.memory.state import StoredRun
from onward.store.ports import JobRecorder
from onward.store.ports.index_shards import DEFAULT_ACTIVE_SHARDS
from onward.store.service import JobStore
from tests.contract import memory_items
from tests.support import ManualClock

Items = list[dict[str, Any]]


class StoreBackend(ABC):
    name: str
    recorder: JobRecorder

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock

    @abstractmethod
    def store(self, *, clock: Any = None, recorder: JobRecorder | None = None, **options: Any) -> JobStore:
        """A JobStore over this backend (its own tenant cache and stats, as a second process would have);
        `clock` defaults to the backend's ManualClock; `recorder`: one wrapping this backend's."""

    @abstractmethod
    def jobs_table(self) -> Items:
        """Every item of the jobs table (plain values), read directly."""

    @abstractmethod
    def outbox_table(self) -> Items:
        """Every item of the outbox table (plain values), read directly."""

    @abstractmethod
    def edit_job_row(self, job_id: str, **attributes: Any) -> None:
        """Change a stored job row behind the store's back (a legacy row, an operator's console edit)."""

    @abstractmethod
    def keep_result_the_old_way(self, job_id: str) -> None:
        """Move a completed job's result off its run record into a result item (`RESULT`), as a stack
        deployed before issue 34 holds the results of the jobs it completed."""

    @abstractmethod
    def open_run_the_old_way(self, job_id: str) -> None:
        """Make a running job's attempt look claimed by the release before issue 34's change: its run record
        put whole at the claim (no outcome, no TTL) and no claim (`run_claimed_at`...) on its row."""

    @abstractmethod
    def overlap_index(self) -> OverlapIndex:
        """The `overlaps` index (onward.operator.overlaps): the jobs whose runs overlapped, by when."""

    def snapshot(self) -> tuple[Items, Items]:
        """Everything stored, in a comparable order."""
        def ordered(items: Items) -> Items:
            return sorted(items, key=lambda item: repr(sorted(item.items())))
        return ordered(self.jobs_table()), ordered(self.outbox_table())

    def item_counts(self) -> tuple[int, int]:
        return len(self.jobs_table()), len(self.outbox_table())

    def __repr__(self) -> str:
        return f"<{self.name} backend>"


class MemoryBackend(StoreBackend):
    """The in-memory recorder; its raw view is what it holds rendered as DynamoDB items
    (tests/contract/memory_items.py), with the TTLs of the retention its stores were given."""

    name = "memory"

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)
        self.recorder = self.memory = MemoryRecorder()
        self.job_retention_s = DEFAULT_JOB_RETENTION_DAYS * DAY_S
        self.retention_s = DEFAULT_OUTBOX_RETENTION_DAYS * DAY_S
        self.policy: RetentionPolicy | None = None

    def store(self, *, clock: Any = None, recorder: JobRecorder | None = None, **options: Any) -> JobStore:
        if "job_retention_days" in options:
            self.job_retention_s = options["job_retention_days"] * DAY_S
        if "outbox_retention_days" in options:
            self.retention_s = options["outbox_retention_days"] * DAY_S
        if "retention_policy" in options:
            self.policy = options["retention_policy"]
        return JobStore(recorder=recorder or self.memory, clock=clock or self.clock, **options)

    def jobs_table(self) -> Items:
        return memory_items.jobs_table(self.memory.contents(), active_shards=DEFAULT_ACTIVE_SHARDS,
                                       job_retention_s=self.job_retention_s, policy=self.policy)

    def outbox_table(self) -> Items:
        return memory_items.outbox_table(self.memory.contents(), retention_s=self.retention_s)

    def edit_job_row(self, job_id: str, **attributes: Any) -> None:
        self.memory.replace_job(job_id, **attributes)

    def overlap_index(self) -> OverlapIndex:
        return self.memory

    def keep_result_the_old_way(self, job_id: str) -> None:
        self.memory.keep_result_the_old_way(job_id)

    def open_run_the_old_way(self, job_id: str) -> None:
        state = self.memory._state
        with state.lock:
            row = state.rows[job_id]
            running = row.open_run()
            assert running is not None
            state.runs.setdefault(job_id, {})[running.attempt] = StoredRun(running)
            state.put_row(row._replace(opened=None))


class DynamoBackend(StoreBackend):
    name = "dynamodb"

    def __init__(self, clock: ManualClock, settings: Settings, client: Any) -> None:
        super().__init__(clock)
        self.settings, self.client = settings, client
        self.recorder = DynamoRecorder(client, settings.jobs_table, settings.outbox_table)

    def store(self, *, clock: Any = None, recorder: JobRecorder | None = None, **options: Any) -> JobStore:
        if recorder is not None:
            return JobStore(self.settings, recorder=recorder, clock=clock or self.clock, **options)
        return JobStore(self.settings, client=self.client, clock=clock or self.clock, **options)

    def overlap_index(self) -> OverlapIndex:
        return DynamoOverlapIndex(self.client, self.settings.jobs_table)

    def keep_result_the_old_way(self, job_id: str) -> None:
        (run,) = [item for item in self.jobs_table() if item["pk"] == job_pk(job_id) and RESULT_ATTRIBUTE in item]
        self.client.update_item(
            TableName=self.settings.jobs_table, Key=wire_key(Key(run["pk"], run["sk"])),
            UpdateExpression="REMOVE #result, #size",
            ExpressionAttributeNames={"#result": RESULT_ATTRIBUTE, "#size": RESULT_SIZE_ATTRIBUTE})
        old = {"pk": run["pk"], "sk": RESULT_SK, "entity": Entity.RESULT.value, "attempt": run["attempt"],
               "size_bytes": run[RESULT_SIZE_ATTRIBUTE], "value": run[RESULT_ATTRIBUTE],
               "expires_at": run["expires_at"]}  # (the shape keys.result_item wrote)
        self.client.put_item(TableName=self.settings.jobs_table, Item=wire_item(old))

    def open_run_the_old_way(self, job_id: str) -> None:
        read = self.recorder.job(job_id)
        assert read is not None
        running = read.open_run()
        assert running is not None
        self.client.put_item(TableName=self.settings.jobs_table, Item=wire_item(run_item(running)),
                             ConditionExpression="attribute_not_exists(pk)")  # (as the old claim's Put)
        self.client.update_item(TableName=self.settings.jobs_table, Key=wire_key(job_key(job_id)),
                                UpdateExpression=f"REMOVE {RUN_CLAIMED_AT}, {RUN_LEASE_EXPIRES_AT}")

    def _scan(self, table: str) -> Items:
        pages = self.client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
        return [from_item(item) for page in pages for item in page["Items"]]

    def jobs_table(self) -> Items:
        return self._scan(self.settings.jobs_table)

    def outbox_table(self) -> Items:
        return self._scan(self.settings.outbox_table)

    def edit_job_row(self, job_id: str, **attributes: Any) -> None:
        names = {f"#a{i}": name for i, name in enumerate(attributes)}
        self.client.update_item(
            TableName=self.settings.jobs_table, Key=wire_key(job_key(job_id)),
            UpdateExpression="SET " + ", ".join(f"#a{i} = :v{i}" for i in range(len(attributes))),
            ConditionExpression="entity = :job",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={
                ":job": {"S": Entity.JOB.value},
                **{f":v{i}": to_attribute(value) for i, value in enumerate(attributes.values())},
            },
        )
