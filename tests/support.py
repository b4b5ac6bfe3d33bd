"""Test helpers shared by unit and integration tests."""

from __future__ import annotations

from typing import Any

from onward.domain import clock
from onward.domain.models import ErrorSummary, NewJob
from onward.domain.schedules import Schedule
from onward.store.dynamo.attributes import to_item
from onward.store.schedules import DUE_ENTITY, SCHEDULE_ENTITY, due_key, schedule_key
from onward.store.service import JobStore

ManualClock = clock.ManualClock  # the tests' clock is the one onward.testing gives handler authors


class PartialFailures:
    """botocore hooks on one Kinesis client that make chosen entries of its first PutRecords calls fail
    the way Kinesis does: the entry is not written (dropped from the request before it is sent) and its
    response entry carries an ErrorCode, the others are written and answered normally.
    `plan[n]` maps entry positions of call n to the error code they get."""

    def __init__(self, kinesis, plan: list[dict[int, str]]) -> None:
        self.plan = plan
        self.calls = 0
        self._failing: dict[int, str] = {}
        kinesis.meta.events.register("before-parameter-build.kinesis.PutRecords", self._drop)
        kinesis.meta.events.register("after-call.kinesis.PutRecords", self._answer)

    def _drop(self, params: dict[str, Any], **_: Any) -> None:
        self._failing = self.plan[self.calls] if self.calls < len(self.plan) else {}
        self.calls += 1
        assert len(self._failing) < len(params["Records"]), "leave at least one entry to send"
        params["Records"] = [r for n, r in enumerate(params["Records"]) if n not in self._failing]

    def _answer(self, parsed: dict[str, Any], **_: Any) -> None:
        written = iter(parsed["Records"])
        total = len(parsed["Records"]) + len(self._failing)
        parsed["Records"] = [{"ErrorCode": self._failing[n], "ErrorMessage": "Rate exceeded for shard"}
                             if n in self._failing else next(written) for n in range(total)]
        parsed["FailedRecordCount"] = len(self._failing)


def dead(store: JobStore, tenant: str, count: int = 1, job_type: str = "demo.fail") -> list[str]:
    """Jobs of `tenant` ended dead, one at a time (each the only due job when claimed)."""
    job_ids = []
    for _ in range(count):
        job_id = store.create(tenant, NewJob(type=job_type, max_attempts=1)).job.job_id
        lease = store.claim("test", 30)
        assert lease is not None and lease.job_id == job_id
        store.fail(lease, ErrorSummary.of("Boom", "failed for good"), permanent=True)
        job_ids.append(job_id)
    return job_ids



def put_legacy_schedules(dynamodb: Any, table: str, schedules: list[Schedule]) -> None:
    """Store schedules as they were before a tenant's schedule counter existed (onward.store.schedules): each
    one's item and due entry, no counter; raw batches, much faster than an add each."""
    items = [{**to_item(schedule.model_dump(mode="json")), "pk": {"S": pk}, "sk": {"S": sk}, "entity": {"S": entity}}
             for schedule in schedules
             for (pk, sk), entity in ((schedule_key(schedule.tenant_id, schedule.name), SCHEDULE_ENTITY),
                                      (due_key(schedule.tenant_id, schedule.name, schedule.next_fire_at), DUE_ENTITY))]
    for start in range(0, len(items), 25):
        dynamodb.batch_write_item(RequestItems={table: [{"PutRequest": {"Item": item}}
                                                        for item in items[start:start + 25]]})


class RequestLog:
    """Every request a boto3 client makes from now on, in order, as (operation, table): what an API answer
    cost in AWS requests, to compare two answers by. `take()` returns the requests so far and starts again;
    `close()` stops logging."""

    def __init__(self, client: Any) -> None:
        self._events = client.meta.events
        self._requests: list[tuple[str, str | None]] = []
        self._events.register("provide-client-params", self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self._requests.append((model.name, params.get("TableName")))

    def take(self) -> list[tuple[str, str | None]]:
        taken, self._requests = self._requests, []
        return taken

    def close(self) -> None:
        self._events.unregister("provide-client-params", self._record)


class CallCounting:
    """A boto3 client that counts its calls of one method (`calls`), passing every call through."""

    def __init__(self, real: Any, method: str) -> None:
        self._real = real
        self._method = method
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._real, name)
        if name != self._method:
            return found

        def counted(**request: Any) -> Any:
            self.calls += 1
            return found(**request)

        return counted


def as_on_aws(environment: dict[str, str]) -> dict[str, str]:
    """The embedded endpoint's environment without what only the local stack sets: its lean client
    (ONWARD_CLIENT_WRAPPER, which names a module of onward_infra), as an ECS task's environment has none."""
    return {name: value for name, value in environment.items() if name != "ONWARD_CLIENT_WRAPPER"}
