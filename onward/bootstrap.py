"""The one place Onward is wired (as cosmicpython's bootstrap.py): a `Deployment` builds each component from
one `Settings`, over one boto3 client per service, the first time it is asked for, and keeps it. The Lambda
entry points (onward/entrypoints/), the `onward` command, the local platform (infra/onward_infra/) and the tests ask it
for what they use instead of building it themselves.

    deployment = Deployment.from_environment()      # this process's, for os.environ (Lambda, `onward`)
    deployment = Deployment(settings, clients={"dynamodb": dynamodb})   # a test's own
    deployment.job_store.create(...); deployment.relay.relay(...)

It lives in handlers/ because it builds the relay, the projector and the API's authenticator, and
dependencies point one way (handlers -> relay, projector -> onward; onward/ knows no entry point).

A Lambda function builds only the components it uses, and each component's builder imports its module itself,
so a function loads only that code (tests/codescan.py reads the builders the same way: a function is granted
what the components it names can do). A variable a component needs but the environment lacks raises
MissingSetting, naming it, when that component is first asked for; a value that cannot work raises
InvalidSetting (or InvalidTokens) then, or at once for the values Settings reads.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, overload

from botocore.config import Config

from onward.settings import (
    API_CLIENT_CONFIG,
    DAY_S,
    WORKER_CLIENT_CONFIG,
    ArchiveSettings,
    AuthoritySettings,
    InvalidSetting,
    Settings,
    number_setting,
)

if TYPE_CHECKING:
    from onward.api.auth import Authenticator
    from onward.api.quota import TenantAllowances
    from onward.maintenance.backlog import BacklogCounter
    from onward.maintenance.scheduler import Scheduler
    from onward.operator.claim_history import RecentClaims
    from onward.operator.conflicts import ConflictReader
    from onward.operator.failure_queues import FailureQueue
    from onward.operator.history.readers import ArchiveReader
    from onward.operator.lag import LagProbe
    from onward.operator.overlaps import OverlapReader
    from onward.operator.parked import ParkedRecordReader
    from onward.pipeline.archive.archiver import Archiver
    from onward.pipeline.archive.sinks import ArchiveSink
    from onward.pipeline.checkpoints import CheckpointStore
    from onward.pipeline.heartbeat_writer import HeartbeatEmitter
    from onward.pipeline.outbox import OutboxReader
    from onward.pipeline.parking import ParkedRecords
    from onward.pipeline.projector.projector import StatusProjector
    from onward.pipeline.relay.publisher import KinesisPublisher
    from onward.pipeline.relay.relay import Relay
    from onward.pipeline.replication_status import ReplicationStatus  # fence reconciler (issue 39)
    from onward.pipeline.shards import ShardCatalog
    from onward.pipeline.view import StatusViewReader
    from onward.pipeline.webhooks.wiring import WebhookParts
    from onward.runtime.authority import AuthorityLease
    from onward.runtime.worker import Registry, Worker
    from onward.store.reads import StoreReads
    from onward.store.schedules import DynamoSchedules
    from onward.store.service import JobStore

DEFAULT_JOB_TYPES = ("demo.echo", "demo.sleep", "demo.flaky", "demo.fail", "demo.crash", "demo.hang",
                     "demo.progress", "demo.snooze")  # demo.progress: issue 38; demo.snooze: issue 37
DEFAULT_WORKER_MODULE = "onward.runtime.demo_jobs"
DEFAULT_WORKER_LEASE_S = 60.0
MAX_WORKER_CONCURRENCY = 64  # jobs one worker-function invocation runs at once (a thread and a process each)
# Variables outside ONWARD_* / *_TABLE / *_STREAM that Settings reads.
_AWS_VARIABLES = frozenset({"AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"})
_DEPLOYMENTS_KEPT = 8

T = TypeVar("T")


class Component(Generic[T]):
    """A Deployment's component: the decorated builder runs on first use, under the deployment's lock (so two
    threads never build it twice), and its result is kept on the deployment. Being kept as an instance
    attribute, it can be replaced there (a test's `monkeypatch.setattr(deployment, "relay", mine)`)."""

    def __init__(self, build: Callable[[Deployment], T]) -> None:
        self._build = build
        self.__doc__ = build.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, deployment: None, owner: type | None = None) -> Component[T]: ...

    @overload
    def __get__(self, deployment: Deployment, owner: type | None = None) -> T: ...

    def __get__(self, deployment: Deployment | None, owner: type | None = None) -> T | Component[T]:
        if deployment is None:
            return self
        with deployment._lock:
            if self._name not in deployment.__dict__:
                deployment.__dict__[self._name] = self._build(deployment)
            built: T = deployment.__dict__[self._name]
        return built


class Deployment:
    """Every component of one deployment (one set of tables and streams), each built once, on first use.

    `settings` names the resources; `clients` are boto3 clients to use instead of building them (by service
    name: "dynamodb", "kinesis", "dynamodbstreams"); `environ` holds the entry points' own variables
    (ONWARD_AUTH, ONWARD_TOKENS, ONWARD_JOB_TYPES, ONWARD_WORKER_MODULE, ...): without them, the defaults."""

    client_config: ClassVar[Config] = WORKER_CLIENT_CONFIG

    def __init__(self, settings: Settings, *, clients: Mapping[str, Any] | None = None,
                 environ: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self.environ: Mapping[str, str] = dict(environ or {})
        self._clients: dict[str, Any] = dict(clients or {})
        self._lock = threading.RLock()

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Deployment:
        """This process's deployment for the environment (os.environ by default): built on the first call,
        the same object on every later call while the variables it reads (ONWARD_*, *_TABLE, *_STREAM, *_QUEUE,
        AWS_ENDPOINT_URL, AWS_REGION, AWS_DEFAULT_REGION) keep their values. An environment with other values
        (each test's stack) gets a deployment of its own; the last few are kept. InvalidSetting at once for a
        value Settings cannot use."""
        source = os.environ if environ is None else environ
        variables = tuple(sorted((name, value) for name, value in source.items() if _configures(name)))
        key = (cls, variables)
        with _deployments_lock:
            found = _deployments.pop(key, None)
            if found is None:
                found = cls(Settings.from_environment(dict(variables)), environ=dict(variables))
            _deployments[key] = found
            while len(_deployments) > _DEPLOYMENTS_KEPT:
                _deployments.popitem(last=False)
        return found

    def client(self, service: str) -> Any:
        """This deployment's boto3 client for `service`, shared by every component that talks to it, with the
        timeouts and retries of `client_config`."""
        with self._lock:
            if service not in self._clients:
                self._clients[service] = self.settings.client(service, self.client_config)
            return self._clients[service]

    # --- the core ------------------------------------------------------------------------------------------

    @Component
    def job_store(self) -> JobStore:
        """The job state machine (JOBS_TABLE, OUTBOX_TABLE; outbox TTLs from ONWARD_OUTBOX_RETENTION_DAYS, the
        TTLs of ended jobs' items from ONWARD_JOB_RETENTION_DAYS)."""
        from onward.store.service import JobStore

        store = JobStore(self.settings, client=self.client("dynamodb"))
        self._attach_authority(store)  # issue 39: the authority lease, when ONWARD_WITNESS names a witness
        return store

    @Component
    def status_view(self) -> StatusViewReader:
        """Reads of the status view (STATUS_TABLE)."""
        from onward.pipeline.view import StatusViewReader

        return StatusViewReader(self.client("dynamodb"), self.settings.require("status_table"))

    @Component
    def checkpoint_store(self) -> CheckpointStore:
        """The relay's checkpoints and the projector's watermarks (CHECKPOINT_TABLE)."""
        from onward.pipeline.checkpoints import CheckpointStore

        return CheckpointStore(self.client("dynamodb"), self.settings.require("checkpoint_table"))

    @Component
    def parked_records(self) -> ParkedRecords:
        """Stream records the relay and the projector could not read, with their reasons (PARKED_TABLE), kept
        for ONWARD_JOB_RETENTION_DAYS."""
        from onward.pipeline.parking import ParkedRecords

        return ParkedRecords(self.client("dynamodb"), self.settings.require("parked_table"),
                             retention_s=self.settings.job_retention_s)

    @Component
    def outbox_reader(self) -> OutboxReader:
        """Reads of the retained outbox: one job's events, a window, all (OUTBOX_TABLE)."""
        from onward.pipeline.outbox import OutboxReader

        return OutboxReader(self.client("dynamodb"), self.settings.require("outbox_table"))

    @Component
    def store_reads(self) -> StoreReads:
        """What operator reads and maintenance passes read of the job store beside its service
        (onward.store.reads): tenants' settings and counters, due jobs, the claim order's head, run records."""
        from onward.store.reads import StoreReads

        return StoreReads(self.job_store)

    @Component
    def backlog_counter(self) -> BacklogCounter:
        """Counts the waiting jobs due now and the running ones (JOBS_TABLE; onward.maintenance.backlog): what the
        worker tasks scale on."""
        from onward.maintenance.backlog import BacklogCounter
        from onward.store.dynamo.backlog_reads import DynamoBacklogReads

        return BacklogCounter(DynamoBacklogReads(self.client("dynamodb"), self.settings.require("jobs_table"),
                                                 self.settings.active_shards))

    @Component
    def heartbeat_emitter(self) -> HeartbeatEmitter:
        """Writes the pipeline heartbeats into the outbox (OUTBOX_TABLE), each beat sized from a listing of
        its stream's open shards taken for it, vouching up to ONWARD_BEAT_SLACK_MS before that listing."""
        from onward.pipeline.heartbeat_writer import HeartbeatEmitter, OutboxStreamListing

        outbox = self.settings.require("outbox_table")
        listing = OutboxStreamListing(self.client("dynamodb"), self.client("dynamodbstreams"), outbox)
        return HeartbeatEmitter(self.client("dynamodb"), outbox, listing, slack_ms=self.settings.beat_slack_ms)

    @Component
    def events_shards(self) -> ShardCatalog:
        """The events stream's open shards, listed at most every 30 s (EVENTS_STREAM): every one bounds the
        view's lag, projected or not."""
        from onward.pipeline.shards import ShardCatalog

        return ShardCatalog(self.client("kinesis"), self.settings.require("events_stream"))

    @Component
    def schedules(self) -> DynamoSchedules:
        """Tenants' periodic jobs and their due entries (JOBS_TABLE; onward.store.schedules)."""
        from onward.store.schedules import DynamoSchedules

        return DynamoSchedules(self.client("dynamodb"), self.settings.require("jobs_table"))

    @Component
    def scheduler(self) -> Scheduler:
        """Creates the jobs of due schedules (onward.maintenance.scheduler) in the job store."""
        from onward.maintenance.scheduler import Scheduler

        return Scheduler(self.job_store, self.schedules)

    # --- the event path ------------------------------------------------------------------------------------

    @Component
    def events_publisher(self) -> KinesisPublisher:
        """Puts events and heartbeats on the events stream (EVENTS_STREAM)."""
        from onward.pipeline.relay.publisher import KinesisPublisher

        return KinesisPublisher(self.client("kinesis"), self.settings.require("events_stream"))

    @Component
    def relay(self) -> Relay:
        """Outbox stream -> events stream, with its own checkpoint; parks what it cannot read, and an event that
        failed its 3rd delivery (onward/pipeline/poison.py)."""
        from onward.pipeline.poison import FailureCounts
        from onward.pipeline.relay.relay import Relay

        return Relay(self.events_publisher, self.checkpoint_store, self.parked_records,
                     failure_counts=FailureCounts(self.client("dynamodb"), self.settings.require("parked_table")))

    @Component
    def status_projector(self) -> StatusProjector:
        """Events stream -> status view, under the version guard (STATUS_TABLE, CONFLICTS_TABLE); ended jobs'
        view rows and kept conflicts expire after ONWARD_JOB_RETENTION_DAYS. A record that keeps failing is
        parked after its PARK_AFTER_FAILURES-th failed delivery (onward/pipeline/poison.py)."""
        from onward.pipeline.poison import FailureCounts
        from onward.pipeline.projector.projector import StatusProjector

        return StatusProjector(self.client("dynamodb"), self.settings.require("status_table"),
                               self.settings.require("conflicts_table"), self.checkpoint_store,
                               self.parked_records, retention_s=self.settings.job_retention_s,
                               failure_counts=FailureCounts(self.client("dynamodb"),
                                                            self.settings.require("parked_table")),
                               policy=self.settings.retention_policy,
                               outbox_retention_s=self.settings.outbox_retention_days * DAY_S,
                               jobs_table=self.settings.require("jobs_table"))

    @Component
    def archive_sink(self) -> ArchiveSink | None:
        """Where the archiver writes: the Firehose delivery stream ARCHIVE_DELIVERY_STREAM (on AWS: Parquet on
        S3, onward.pipeline.archive.firehose), else the Parquet files under ONWARD_ARCHIVE_DIR
        (onward.pipeline.archive.parquet); None when no archive is configured (archiving is off)."""
        delivery_stream = self.environ.get("ARCHIVE_DELIVERY_STREAM")
        if delivery_stream:
            from onward.pipeline.archive.firehose import FirehoseArchive

            return FirehoseArchive(self.client("firehose"), delivery_stream)
        directory = self.environ.get("ONWARD_ARCHIVE_DIR")
        if directory:
            from onward.pipeline.archive.parquet import ParquetDirectory

            return ParquetDirectory(directory)
        return None

    def archive_reader(self, max_wait_s: float) -> ArchiveReader | None:
        """The archive's reader (`onward history`, GET /jobs/{id} of an archived job): Athena over the Glue table
        when one is configured, else DuckDB over ONWARD_ARCHIVE_DIR, else None; an Athena query waits at most
        `max_wait_s`."""
        from onward.operator.history.readers import archive_reader

        return archive_reader(ArchiveSettings.from_environment(self.environ), lambda: self.client("athena"),
                              max_wait_s=max_wait_s)

    @Component
    def archiver(self) -> Archiver:
        """Events stream -> the run-history archive: each finished job's row, runs, result (JOBS_TABLE) and events
        (OUTBOX_TABLE) as one record, written to archive_sink; with no sink it reads nothing."""
        from onward.pipeline.archive.archiver import Archiver
        from onward.store.dynamo.history import DynamoJobHistory

        return Archiver(DynamoJobHistory(self.client("dynamodb"), self.settings.require("jobs_table"),
                                         self.settings.require("outbox_table")), self.archive_sink)

    # --- the entry points' own configuration --------------------------------------------------------------

    @Component
    def authenticator(self) -> Authenticator:
        """Who is calling the HTTP API: ONWARD_AUTH=tokens|jwt and their variables (onward.api.auth);
        InvalidTokens when ONWARD_TOKENS cannot work."""
        from onward.api.auth import authenticator_from_environment

        return authenticator_from_environment(self.environ)

    @Component
    def failure_queues(self) -> dict[str, FailureQueue]:
        """The relay's and the projector's on-failure queues, by source, those the environment names
        (RELAY_FAILURES_QUEUE, PROJECTOR_FAILURES_QUEUE): what `onward redrive` drains."""
        from onward.operator.failure_queues import FailureQueue

        queues: dict[str, FailureQueue] = {}
        if self.settings.relay_failures_queue is not None:
            queues["relay"] = FailureQueue(self.client("sqs"), url=self.settings.require("relay_failures_queue"))
        if self.settings.projector_failures_queue is not None:
            queues["projector"] = FailureQueue(self.client("sqs"),
                                               url=self.settings.require("projector_failures_queue"))
        return queues

    @Component
    def request_allowances(self) -> TenantAllowances:
        """Each tenant's request quota on the HTTP API: ONWARD_TENANT_REQUESTS_PER_S requests a second (unset
        or 0: none), counted in the jobs table (onward.api.quota)."""
        from onward.api.quota import TenantAllowances
        from onward.domain.request_quota import RequestQuota
        from onward.store.dynamo.request_counts import DynamoRequestCounter

        quota = RequestQuota(number_setting(self.environ, "ONWARD_TENANT_REQUESTS_PER_S", 0.0))
        if not quota.enforced:
            return TenantAllowances(quota, None)
        counter = DynamoRequestCounter(self.client("dynamodb"), self.settings.require("jobs_table"))
        return TenantAllowances(quota, counter)

    @Component
    def job_types(self) -> frozenset[str]:
        """The job types the HTTP API accepts: the comma list ONWARD_JOB_TYPES, else DEFAULT_JOB_TYPES."""
        listed = self.environ.get("ONWARD_JOB_TYPES", "").split(",")
        return frozenset([name.strip() for name in listed if name.strip()] or DEFAULT_JOB_TYPES)

    @Component
    def worker_lease_s(self) -> float:
        """The lease the worker function takes on each job: ONWARD_WORKER_LEASE_S, else 60 s."""
        return number_setting(self.environ, "ONWARD_WORKER_LEASE_S", DEFAULT_WORKER_LEASE_S, positive=True)

    @Component
    def worker_registry(self) -> Registry:
        """The job handlers workers run: the `registry` of the module ONWARD_WORKER_MODULE names (else
        onward.runtime.demo_jobs). TypeError when it has no registry."""
        from onward.runtime.worker import Registry

        module = self.environ.get("ONWARD_WORKER_MODULE") or DEFAULT_WORKER_MODULE
        registry = getattr(importlib.import_module(module), "registry", None)
        if not isinstance(registry, Registry):
            raise TypeError(f"ONWARD_WORKER_MODULE={module} has no `registry` (an onward.runtime.worker.Registry)")
        return registry

    @Component
    def worker_concurrency(self) -> int:
        """How many jobs one invocation of the worker function runs at once: ONWARD_WORKER_CONCURRENCY, a whole
        number from 1 to MAX_WORKER_CONCURRENCY, else 1. InvalidSetting otherwise."""
        raw = self.environ.get("ONWARD_WORKER_CONCURRENCY") or "1"
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_WORKER_CONCURRENCY:
            raise InvalidSetting(f"ONWARD_WORKER_CONCURRENCY must be a whole number from 1 to "
                                 f"{MAX_WORKER_CONCURRENCY}, not {raw!r}")
        return int(raw)

    @Component
    def workers(self) -> tuple[Worker, ...]:
        """The worker function's Workers: `worker_concurrency` of them, one per thread of an invocation, each with
        the handlers of `worker_registry` (and a handler process of its own), each job leased for
        `worker_lease_s`. Kept with the deployment, so a warm function reuses them and their processes."""
        from onward.runtime.declared_types import declare_types
        from onward.runtime.worker import Worker

        declare_types(self.job_store, self.worker_registry)  # retry policies per type (issue 37), once per start
        return tuple(Worker(self.job_store, self.worker_registry, lease_s=self.worker_lease_s)
                     for _ in range(self.worker_concurrency))

    # --- operators' tools -----------------------------------------------------------------------------------

    @Component
    def recent_claims(self) -> RecentClaims:
        """Claims per tenant over a recent window (onward.operator.claim_history), from the outbox's `by_time`
        index (OUTBOX_TABLE)."""
        from onward.operator.claim_history import RecentClaims
        from onward.store.dynamo.claim_log import DynamoClaimLog

        return RecentClaims(DynamoClaimLog(self.client("dynamodb"), self.settings.require("outbox_table")))

    @Component
    def parked_reader(self) -> ParkedRecordReader:
        """Parked records read back a page at a time (PARKED_TABLE; onward.operator.parked)."""
        from onward.operator.parked import ParkedRecordReader

        return ParkedRecordReader(self.client("dynamodb"), self.settings.require("parked_table"))

    @Component
    def conflict_reader(self) -> ConflictReader:
        """The projection conflicts kept apart, each with its reason (CONFLICTS_TABLE; onward.operator.conflicts)."""
        from onward.operator.conflicts import ConflictReader
        from onward.pipeline.projector.kept_conflicts import KeptConflictTable

        return ConflictReader(KeptConflictTable(self.client("dynamodb"), self.settings.require("conflicts_table")))

    @Component
    def overlap_reader(self) -> OverlapReader:
        """The jobs whose attempts overlapped, through the jobs table's `overlaps` index (JOBS_TABLE;
        onward.operator.overlaps): operators only, no Lambda function asks for it."""
        from onward.operator.overlaps import OverlapReader
        from onward.store.dynamo.overlap_index import DynamoOverlapIndex

        return OverlapReader(DynamoOverlapIndex(self.client("dynamodb"), self.settings.require("jobs_table")),
                             self.job_store, self.store_reads)

    def lag_probe(self, outbox_retention_days: float | None = None) -> LagProbe:
        """A probe of the pipeline's lag (`onward lag`), new on each call; `outbox_retention_days` is the
        retention the stack was deployed with (default: the settings', ONWARD_OUTBOX_RETENTION_DAYS)."""
        from onward.operator.lag import LagProbe

        days = self.settings.outbox_retention_days if outbox_retention_days is None else outbox_retention_days
        return LagProbe(self.checkpoint_store, self.outbox_reader, self.client("kinesis"),
                        self.settings.require("events_stream"), outbox_retention_s=days * 86400.0)

    # --- completion webhooks (issue 38) --------------------------------------------------------------------
    @Component
    def webhooks(self) -> WebhookParts:
        """Endpoints and deliveries (JOBS_TABLE), the delivery queue (WEBHOOK_DELIVERIES_QUEUE), the matcher and
        the deliverer (onward.pipeline.webhooks; their settings: onward/pipeline/webhooks/config.py)."""
        from onward.pipeline.webhooks.config import WebhookSettings
        from onward.pipeline.webhooks.queue import SqsDeliveryQueue
        from onward.pipeline.webhooks.wiring import WebhookParts
        from onward.store.dynamo.webhooks import DynamoWebhooks

        return WebhookParts(WebhookSettings.from_environment(self.environ),
                            DynamoWebhooks(self.client("dynamodb"), self.settings.require("jobs_table")),
                            lambda: SqsDeliveryQueue(self.client("sqs"),
                                                     self.settings.require("webhook_deliveries_queue")))

    # --- the regional authority (issue 39: the authority lease and `onward failover`) ---------------------
    def authority_lease(self) -> AuthorityLease | None:
        """The authority lease of this deployment's job store (onward.runtime.authority): None without
        ONWARD_WITNESS (one Region: always home)."""
        from onward.runtime.authority import lease_of

        return lease_of(self.job_store)

    def _attach_authority(self, store: JobStore) -> None:
        from onward.runtime.authority import attach, lease_from_settings

        """With a witness (several Regions): the store writes under the epoch item's epoch from the start (the
        lease keeps it current), and the lease decides whether its processes act. Without one: epoch 0, home."""
        lease = lease_from_settings(AuthoritySettings.from_environment(self.environ), self.settings, store)
        if lease is not None:
            store.set_region_epoch(store.region_epoch().epoch)
            attach(store, lease)

    # fence reconciler (issue 39): the replication block of the statuses' freshness after a failover
    @Component
    def replication_status(self) -> ReplicationStatus:
        from onward.pipeline.replication_status import ReplicationStatus

        return ReplicationStatus(self.client("dynamodb"), self.settings.require("jobs_table"),
                                 self.job_store.region_epoch)


class ApiDeployment(Deployment):
    """The HTTP API function's deployment: its clients give up within API Gateway's 29 s (API_CLIENT_CONFIG:
    short timeouts, 3 attempts), so the handler answers a problem before the gateway answers a 503/504 for it.
    `from_environment` keeps it apart from the Deployment of the same environment (their key names the class),
    so workers, stream consumers and operators in the same process keep their patient clients."""

    client_config: ClassVar[Config] = API_CLIENT_CONFIG


_deployments: OrderedDict[tuple[type[Deployment], tuple[tuple[str, str], ...]], Deployment] = OrderedDict()
_deployments_lock = threading.Lock()


def _configures(variable: str) -> bool:
    """Whether a variable can change what a Deployment builds."""
    return (variable.startswith("ONWARD_") or variable.endswith(("_TABLE", "_STREAM", "_QUEUE"))
            or variable in _AWS_VARIABLES)
