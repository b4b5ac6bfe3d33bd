"""The drill's stage: two Regions and a witness in one process, and each Region's platform.

- `Regions`: three embedded endpoints (onward_infra.endpoint) as three AWS Regions, the stack deployed in each:
  A (the home) and B (the standby) with the replicator between their jobs and outbox tables (last writer wins,
  a lag, partition and heal: onward_infra.replication, as `onward regions` runs it), W (the witness's Region,
  not replicated: `ONWARD_WITNESS=table:<W>` names the `WITNESS`/`HOME` item of its jobs table).
- `RegionSide`: one Region's platform as `onward up` runs it (onward_infra.platform.LocalPlatform's
  components: a worker pool, the reaper, the pipeline heartbeats, the relay and the projector behind the local
  pollers), each started and stopped on its own (B's warm pipeline is its relay and projector only). Two
  Regions share this process, so each side's relay and projector handlers are bound to its own Deployment
  (`relay_handler`, `projector_handler`: the Lambda handlers' work without the handlers'
  `Deployment.from_environment()`, which reads the one os.environ of the process).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any, Self

from aws_lambda_powertools.utilities.data_classes import DynamoDBStreamEvent
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.data_classes.kinesis_stream_event import KinesisStreamRecord

from onward.bootstrap import Deployment
from onward.entrypoints.fence_reconciler import stream_record
from onward.entrypoints.projector import _metadata, shard_of
from onward.entrypoints.relay import _stream_record
from onward.maintenance.reaper import reap_once
from onward.pipeline.fence_reconciler.reconciler import FenceReconciler, ReconcileTally
from onward.pipeline.projector.projector import BatchTally, ShardRecord
from onward.pipeline.relay.relay import Relay
from onward.runtime.pool import WorkerPool
from onward.runtime.worker import JobContext, Registry
from onward.settings import Settings
from onward.store.service import JobStore
from onward_infra.endpoint import DUMMY_CREDENTIALS, EmbeddedEndpoint
from onward_infra.platform import BackgroundLoop
from onward_infra.pollers import EventsStreamPoller, JobsStreamPoller, OutboxStreamPoller
from onward_infra.replication.replicator import Replicator, tables_of
from tests.drill.history import Execution

# Regions no other test of the suite deploys in (moto's tables of one Region are shared by its endpoints).
HOME, STANDBY, WITNESS = "eu-west-3", "eu-west-2", "eu-north-1"
JOB_TYPE = "drill.work"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Regions:
    """A, B and W as three Regions, the replicator between A and B (lag `lag_s` each way); each of A's and B's
    environments names the witness and the authority lease (`lease_s`, checked every `check_s`)."""

    def __init__(self, lag_s: float, lease_s: float, check_s: float) -> None:
        self.lag_s, self.lease_s, self.check_s = lag_s, lease_s, check_s
        self._stack = ExitStack()
        self.environments: dict[str, dict[str, str]] = {}
        self.replicator: Replicator | None = None

    def __enter__(self) -> Self:
        # The witness's clients are signed (onward.operator.witness): this process has credentials as an
        # operator's shell and a Region's processes do; the embedded endpoints accept any.
        for name, value in DUMMY_CREDENTIALS.items():
            os.environ.setdefault(name, value)
        try:
            endpoints = {region: self._stack.enter_context(EmbeddedEndpoint(region=region))
                         for region in (HOME, STANDBY, WITNESS)}
            self.environments = {region: dict(endpoint.deploy(jobs_stream=region != WITNESS).environment)
                                 for region, endpoint in endpoints.items()}
            witness_url = self.environments[WITNESS]["AWS_ENDPOINT_URL"]
            for region in (HOME, STANDBY):
                self.environments[region].update(authority_environment(region, witness_url, self.lease_s,
                                                                       self.check_s))
            replicated = {region: self.environments[region] for region in (HOME, STANDBY)}
            self.replicator = self._stack.enter_context(
                Replicator([endpoints[HOME], endpoints[STANDBY]], tables_of(replicated)))
            self.replicator.set_lag(self.lag_s)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    @property
    def links(self) -> Replicator:
        assert self.replicator is not None
        return self.replicator



def authority_environment(region: str, witness_url: str, lease_s: float, check_s: float) -> dict[str, str]:
    """What a process of `region` is configured with to act only while the witness names it home
    (onward.runtime.authority: ONWARD_WITNESS `table:<W>`, on W's endpoint; A home until a failover)."""
    return {"AWS_REGION": region, "ONWARD_WITNESS": f"table:{WITNESS}", "ONWARD_WITNESS_ENDPOINT_URL": witness_url,
            "ONWARD_HOME_REGION": HOME, "ONWARD_AUTHORITY_LEASE_S": str(lease_s),
            "ONWARD_AUTHORITY_CHECK_S": str(check_s)}


def relay_handler(deployment: Deployment) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """onward.entrypoints.relay.handler's work, on `deployment`."""

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        records = [_stream_record(record) for record in DynamoDBStreamEvent(event).records]
        if not records:
            return {"batchItemFailures": []}
        outcome = deployment.relay.relay(records)
        failed = outcome.first_unpublished
        return {"batchItemFailures": [] if failed is None else [{"itemIdentifier": failed}]}
    return handler


def projector_handler(deployment: Deployment) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """onward.entrypoints.projector.handler's work, on `deployment` (a batch is one shard's, as Lambda's)."""

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        records = [KinesisStreamRecord(raw) for raw in event.get("Records", [])]
        if not records:
            return {"batchItemFailures": []}
        projector = deployment.status_projector
        tally = BatchTally()
        shard = shard_of(records[0])
        failure = projector.project_batch(shard, [ShardRecord(r.kinesis.sequence_number, r.kinesis.data_as_bytes(),
                                                              _metadata(r)) for r in records], tally)
        projector.finish_batch(shard, tally)
        if failure is None:
            return {"batchItemFailures": []}
        return {"batchItemFailures": [{"itemIdentifier": records[failure.index].kinesis.sequence_number}]}
    return handler


def reconciler_handler(reconciler: FenceReconciler, tally: ReconcileTally
                       ) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """onward.entrypoints.fence_reconciler.handler's work, with `reconciler` (B's): in order, stopping at the
    first record that fails."""

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        records = [stream_record(DynamoDBRecord(raw)) for raw in event.get("Records", [])]
        failure = reconciler.reconcile(records, tally) if records else None
        if failure is None:
            return {"batchItemFailures": []}
        print(f"drill: the fence reconciler failed at a record: {failure.error!r}", file=sys.stderr)
        return {"batchItemFailures": [{"itemIdentifier": records[failure.index].sequence_number}]}
    return handler


class RegionSide:
    """One Region's platform (see the module's docstring). `role` is "A" or "B". Every attempt its workers ran
    is a line of `executions_path` (the workers run handlers in forked children: a file is what they share)."""

    def __init__(self, role: str, environment: dict[str, str], *, workers: int, lease_s: float,
                 executions_path: str) -> None:
        self.role = role
        self.environment = environment
        self.deployment = Deployment(Settings.from_environment(environment), environ=dict(environment))
        self._workers, self._lease_s = workers, lease_s
        self._executions_path = executions_path
        self.loops: dict[str, BackgroundLoop] = {}
        self.pool: WorkerPool | None = None
        self.reconciler_poller: JobsStreamPoller | None = None

    def store(self) -> JobStore:
        """The store of a process of this Region started now: a Deployment of its own, so its writer's epoch is
        the Region's epoch item as it now is, as a process reads it at its start (the shared interface)."""
        return Deployment(Settings.from_environment(self.environment), environ=dict(self.environment)).job_store

    def unleased_store(self) -> JobStore:
        """A store of this Region with no authority lease, writing under epoch 0: the broken worker's."""
        return JobStore(self.deployment.settings, client=self.deployment.client("dynamodb"))

    def registry(self) -> Registry:
        registry = Registry()

        @registry.register(JOB_TYPE, timeout_s=60)
        def work(context: JobContext) -> dict[str, Any]:
            started = now_ms()
            context.wait(context.params.get("ms", 20) / 1000)
            context.stop_if_asked()
            record_execution(self._executions_path,
                             Execution(self.role, context.job_id, context.attempt, started, now_ms()))
            return {"attempt": context.attempt, "region": self.role}

        return registry

    def start_pipeline(self, *, heartbeats: bool) -> None:
        deployment = self.deployment
        outbox = deployment.client("dynamodb").describe_table(
            TableName=deployment.settings.require("outbox_table"))["Table"]
        relay = OutboxStreamPoller(deployment.client("dynamodbstreams"), outbox["LatestStreamArn"],
                                   relay_handler(deployment),
                                   Relay(deployment.events_publisher, deployment.checkpoint_store,
                                         deployment.parked_records, deployment.outbox_reader),
                                   deployment.checkpoint_store, batch_size=100)
        projector = EventsStreamPoller(deployment.client("kinesis"), deployment.settings.require("events_stream"),
                                       projector_handler(deployment), deployment.checkpoint_store, batch_size=100)
        self.loop("relay", relay.poll_once, 0.1)
        self.loop("projector", projector.poll_once, 0.1)
        if heartbeats:
            self.start_heartbeats()

    def start_reconciler(self, store: JobStore) -> ReconcileTally:
        """The fence reconciler on this Region's jobs-table stream (its mapping's poller), from the
        stream's trim horizon; its tally."""
        deployment = self.deployment
        jobs = deployment.client("dynamodb").describe_table(
            TableName=deployment.settings.require("jobs_table"))["Table"]
        tally = ReconcileTally()
        handler = reconciler_handler(FenceReconciler(deployment.client("dynamodb"),
                                                     deployment.settings.require("jobs_table"), store), tally)
        self.reconciler_poller = JobsStreamPoller(deployment.client("dynamodbstreams"), jobs["LatestStreamArn"],
                                                  handler, None, deployment.checkpoint_store, batch_size=100,
                                                  consumer="local-mapping:fence-reconciler")
        self.loop("fence-reconciler", self.reconciler_poller.poll_once, 0.2)
        return tally

    def start_heartbeats(self) -> None:
        emitter = self.deployment.heartbeat_emitter

        def beat() -> bool:
            emitter.emit()
            return False
        self.loop("heartbeat", beat, 0.5)

    def start_workers(self, store: JobStore | None = None) -> JobStore:
        """The worker pool and the reaper on `store` (default: a new one of this Region as it now is)."""
        store = store or self.store()
        self.pool = WorkerPool(store, self.registry(), self._workers, self._lease_s, stop_grace_s=1.0)
        self.pool.start()
        self.loop("reaper", lambda: reap_once(store), 0.5)
        return store

    def loop(self, name: str, tick: Callable[[], Any], idle_s: float) -> None:
        loop = BackgroundLoop(f"{self.role}-{name}", tick, idle_s)
        self.loops[name] = loop
        loop.start()

    def stop_workers(self) -> None:
        if self.pool is not None:
            self.pool.stop()
            self.pool = None
        if "reaper" in self.loops:
            self.loops.pop("reaper").stop(5.0)

    def stop(self) -> None:
        self.stop_workers()
        for loop in self.loops.values():
            loop.stop(5.0)
        self.loops.clear()


def record_execution(path: str, execution: Execution) -> None:
    """One line, appended in one write (O_APPEND: lines of processes writing at once do not interleave)."""
    line = json.dumps(dataclasses.astuple(execution)) + "\n"
    with open(path, "a", encoding="utf-8") as file:
        file.write(line)


def read_executions(path: str) -> list[Execution]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as file:
        return [Execution(*json.loads(line)) for line in file if line.strip()]


def export(environment: dict[str, str]) -> dict[str, str]:
    """os.environ with `environment` over it (for a command run against one Region)."""
    return {**os.environ, **environment}
