"""The projector writes a batch's jobs at once, against the embedded endpoint: more than one PutItem in flight,
while each job's own writes never overlap and keep the batch's order."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from onward.bootstrap import Deployment
from onward.domain.projection import ProjectionOutcome
from onward.pipeline.projector.projector import BatchTally, ShardRecord, StatusProjector
from onward.pipeline.relay.publisher import encode
from tests.integration.pipeline.test_projection import SHARD, make_event, new_job_id, view_of

JOBS = 16
WAIT_FOR_COMPANY_S = 5.0  # how long the first write waits for a second one to be in flight at the same time


class InFlight:
    """A DynamoDB client recording each PutItem (job, the event's version, the condition's version) in call
    order per job, how many run at once (most of all), and any PutItem begun while one of the same job was
    in flight. The first PutItem waits until a second is in flight (at most WAIT_FOR_COMPANY_S): a
    projector writing one at a time gets none, and shows a most of 1."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self._lock = threading.Lock()
        self._running: dict[str, int] = defaultdict(int)
        self._now = 0
        self.most = 0
        self.calls: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.overlapping: list[str] = []
        self._company = threading.Event()
        self._first = True

    def put_item(self, **request: Any) -> Any:
        job_id = request["Item"]["job_id"]["S"]
        with self._lock:
            if self._running[job_id]:
                self.overlapping.append(job_id)
            self._running[job_id] += 1
            self._now += 1
            self.most = max(self.most, self._now)
            first, self._first = self._first, False
            if self._now > 1:
                self._company.set()
            self.calls[job_id].append((int(request["Item"]["version"]["N"]),
                                       int(request["ExpressionAttributeValues"][":version"]["N"])))
        try:
            if first:
                self._company.wait(WAIT_FOR_COMPANY_S)
            return self._real.put_item(**request)
        finally:
            with self._lock:
                self._running[job_id] -= 1
                self._now -= 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_batch_of_many_jobs_is_written_at_once_each_jobs_events_in_order_and_never_overlapping(
        stack_environment, settings, dynamodb):
    """Sixteen jobs, each already at v1 in the view; the batch carries every job's v1 (a redelivery), then
    every v2, then every v3, so each job's events are spread over the batch. The first coalesced write is
    refused (the view is not below v1) and the plan made again from what it holds: v1 a duplicate, v3 written
    under "below v2". Without the pool, one PutItem at a time (most == 1); with jobs split across threads by
    event instead of by job, a job's writes could overlap or come out of order, and the view could end at v2."""
    deployment = Deployment.from_environment()
    jobs = [new_job_id() for _ in range(JOBS)]
    for job_id in jobs:
        deployment.status_projector.project(make_event(job_id, 1, "queued", attempt=0))
    events = [make_event(job_id, version, status, attempt=0 if version == 1 else 1)
              for version, status in ((1, "queued"), (2, "running"), (3, "succeeded")) for job_id in jobs]
    client = InFlight(deployment.client("dynamodb"))
    projector = StatusProjector(client, settings.status_table, settings.conflicts_table,
                                deployment.checkpoint_store, deployment.parked_records)
    tally = BatchTally()

    failure = projector.project_batch(SHARD, [ShardRecord(str(index + 1), encode(event))
                                              for index, event in enumerate(events)], tally)

    assert failure is None
    assert client.most > 1
    assert client.overlapping == []
    # per job: the refused first write (v3 under the condition "below v1"), then v3 under "below v2"
    assert {job_id: client.calls[job_id] for job_id in jobs} == {job_id: [(3, 1), (3, 2)] for job_id in jobs}
    assert tally.writes_saved == JOBS  # three events, two writes each
    assert tally.outcomes == {ProjectionOutcome.DUPLICATE: JOBS, ProjectionOutcome.APPLIED: 2 * JOBS}
    assert len(tally.lag_ms) == 2 * JOBS
    assert {view_of(dynamodb, settings, job_id)["status"] for job_id in jobs} == {"succeeded"}
