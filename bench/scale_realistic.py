"""The realistic workload of bench/scale.py: jobs arrive while others are claimed, take time, and go through the
pipeline, on a virtual clock, against the metered embedded endpoint.

Jobs arrive at a steady rate (one every 1 / rate s) for tenants picked at random, so a tenant's queue empties
and fills again (its entry leaves and re-enters the `active` index). Worker slots spread over processes (one
JobStore each: a process's caches) claim, hold each job for a duration drawn uniformly from JOB_MS (the
store's clock moves on meanwhile, so many attempts run at once and a claim happens while others run), and
complete it with a result; a slot whose claim found nothing waits as onward/runtime/worker.py's does (its
idle backoff) before it claims again. The API's creates go through a store of their own.

The pipeline runs through its real code: the local event source mappings (onward_infra.pollers, as `onward
up` runs them) hand the outbox stream's records to the relay's Lambda handler every RELAY_POLL_MS and the
events stream's to the projector's every PROJECTOR_POLL_MS of virtual time (Lambda polls a DynamoDB stream
shard four times a second and a Kinesis shard once), in batches of template.yaml's BatchSize. Each
invocation is counted, with its records and the AWS requests it made.

The run is one discrete-event simulation in virtual time: nothing waits on this machine's clock, so the
counts (units, records, invocations per job) are those of the simulated rates, whatever this machine's speed.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from onward.bootstrap import Deployment
from onward.domain.backoff import BackoffPolicy
from onward.domain.clock import ManualClock
from onward.domain.models import Lease, NewJob
from onward.entrypoints import projector as projector_handler
from onward.entrypoints import relay as relay_handler
from onward.pipeline.relay.relay import Relay
from onward.settings import Settings
from onward.store.ports import Tenant
from onward.store.service import JobStore
from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.metering import Meter, MeterReading
from onward_infra.pollers import EventsStreamPoller, OutboxStreamPoller
from onward_infra.template import load_template

JOB_MS = (100, 1_000)  # a job's duration, drawn uniformly
RELAY_POLL_MS = 250
PROJECTOR_POLL_MS = 1_000
LEASE_S = 60.0
IDLE = BackoffPolicy(base_s=0.5, cap_s=2.0)  # onward/runtime/worker.py's idle polling (idle_s, idle_max_s)
JOB = NewJob(type="demo.echo", params={"n": 1})
RESULT = {"echoed": {"n": 1}}

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def seeded_job_ids(rng: random.Random) -> Callable[[], str]:
    """Job ids drawn from the run's rng: a job's id picks its Kinesis shard, queue shard and index partitions,
    so a run's hottest-key figures repeat run to run (uuid4 ids moved them by a few percent, more in a small
    run)."""
    ids = random.Random(rng.getrandbits(64))
    return lambda: uuid.UUID(int=ids.getrandbits(128), version=4).hex


@dataclass(frozen=True)
class Workload:
    """What to simulate: `jobs` jobs arriving at `rate_per_s` for `tenants` (each with `ready_shards`), run by
    `processes` x `slots` workers."""

    name: str
    tenants: tuple[str, ...]
    ready_shards: int
    jobs: int
    rate_per_s: float
    processes: int
    slots: int
    # tags (issue 38): the tags every job carries (none: the jobs carry no tags)
    tags: tuple[tuple[str, str], ...] = ()

    def job(self) -> NewJob:
        """The job every arrival creates."""
        return NewJob(type=JOB.type, params=JOB.params, tags=dict(self.tags)) if self.tags else JOB


@dataclass
class Invocations:
    """A Lambda function's invocations (the relay's and the projector's as their event source mappings formed
    the batches; the API's, one per create) with their records and the AWS requests made inside them."""

    count: int = 0
    records: int = 0
    requests: int = 0  # the AWS requests the handler made, all invocations together

    @contextmanager
    def one(self, records: int, meter: Meter) -> Iterator[None]:
        """Count one invocation of `records` records, and the requests made inside the block."""
        before = sum(meter.reading.requests.values())
        try:
            yield
        finally:
            self.count += 1
            self.records += records
            self.requests += sum(meter.reading.requests.values()) - before

    def counting(self, handler: Handler, meter: Meter) -> Handler:
        """`handler`, each of its invocations counted."""
        def invoke(event: dict[str, Any], context: Any) -> dict[str, Any]:
            with self.one(len(event["Records"]), meter):
                return handler(event, context)
        return invoke


@dataclass
class Run:
    """What one realistic run measured: the meter's reading over the whole run and the Lambda invocations."""

    workload: Workload
    reading: MeterReading
    virtual_s: float
    empty_claims: int
    relay: Invocations
    projector: Invocations
    api: Invocations  # the creates, one per job, as the API's Lambda makes them
    environment: dict[str, str]
    events_stream: dict[str, Any] = field(default_factory=dict)  # shards and mode, as deployed from the template


def mapping_batch_sizes() -> dict[str, int]:
    """BatchSize of the relay's and the projector's event source mappings, read from template.yaml now."""
    resources = load_template()["Resources"]
    sizes = {}
    for name, function in (("relay", "RelayFunction"), ("projector", "ProjectorFunction")):
        events = resources[function]["Properties"]["Events"]
        (mapping,) = events.values()
        sizes[name] = int(mapping["Properties"]["BatchSize"])
    return sizes


@contextmanager
def lambda_environment(environment: dict[str, str]) -> Iterator[None]:
    """The deployment's names in os.environ while the handlers run (they build their Deployment from it, as on
    Lambda), their metrics off and their loggers at WARNING (they log every batch at INFO); restored after."""
    saved = dict(os.environ)
    loggers = [logging.getLogger(name) for name in ("onward-relay", "onward-projector")]
    levels = [logger.level for logger in loggers]
    os.environ.update({**environment, "POWERTOOLS_METRICS_DISABLED": "true"})
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


class Simulation:
    """One workload on a fresh stack of template.yaml: see the module's docstring."""

    def __init__(self, endpoint: EmbeddedEndpoint, meter: Meter, stack_name: str, settings_of: Callable[
            [dict[str, str]], Settings], workload: Workload, rng: random.Random) -> None:
        self.workload, self.meter, self.rng = workload, meter, rng
        # the template's defaults: the events stream sized for TargetJobsPerSecond as AWS gets it
        self.environment = endpoint.deploy(stack_name, parameters={}).environment
        self.settings = settings_of(self.environment)
        self.clock = ManualClock(int(time.time() * 1000))
        client = endpoint.client("dynamodb")
        self.api = JobStore(self.settings, client=client, clock=self.clock, new_job_id=seeded_job_ids(rng))
        self.processes = [JobStore(self.settings, client=client, clock=self.clock)
                          for _ in range(workload.processes)]
        self.relay, self.projector, self.api_calls = Invocations(), Invocations(), Invocations()
        self._deployment = Deployment(self.settings, clients={
            name: endpoint.client(name) for name in ("dynamodb", "dynamodbstreams", "kinesis")})
        self._queue: list[tuple[int, int, str, Any]] = []
        self._order = itertools.count()
        self.empty_claims = 0

    def _pollers(self) -> tuple[OutboxStreamPoller, EventsStreamPoller]:
        """The relay's and the projector's event source mappings, as infra/onward_infra/pipeline.py builds
        them, with the handlers counted and template.yaml's batch sizes."""
        deployment, sizes = self._deployment, mapping_batch_sizes()
        outbox = deployment.client("dynamodb").describe_table(
            TableName=self.settings.require("outbox_table"))["Table"]
        parked = deployment.parked_records
        relay = OutboxStreamPoller(
            deployment.client("dynamodbstreams"), outbox["LatestStreamArn"],
            self.relay.counting(relay_handler.handler, self.meter),
            Relay(deployment.events_publisher, deployment.checkpoint_store, parked, deployment.outbox_reader),
            deployment.checkpoint_store, batch_size=sizes["relay"], parked=parked)
        projector = EventsStreamPoller(
            deployment.client("kinesis"), self.settings.require("events_stream"),
            self.projector.counting(projector_handler.handler, self.meter), deployment.checkpoint_store,
            batch_size=sizes["projector"], parked=parked)
        return relay, projector

    def _at(self, at_ms: int, kind: str, payload: Any = None) -> None:
        heapq.heappush(self._queue, (at_ms, next(self._order), kind, payload))

    def run(self) -> Run:
        workload = self.workload
        for name in workload.tenants:
            self.api.register_tenant(Tenant(name, ready_shards=workload.ready_shards))
        with lambda_environment(self.environment):
            relay, projector = self._pollers()
            self.meter.reset()
            started = self.clock.now
            self._simulate(relay, projector)
            reading = self.meter.reset()
        stream = self._deployment.client("kinesis").describe_stream_summary(
            StreamName=self.settings.require("events_stream"))["StreamDescriptionSummary"]
        return Run(workload, reading, (self.clock.now - started) / 1000, self.empty_claims, self.relay,
                   self.projector, self.api_calls, self.environment,
                   {"open_shards": stream["OpenShardCount"],
                    "mode": stream.get("StreamModeDetails", {}).get("StreamMode", "PROVISIONED")})

    def _simulate(self, relay: OutboxStreamPoller, projector: EventsStreamPoller) -> None:
        workload, now = self.workload, self.clock.now
        for n in range(workload.jobs):
            self._at(now + int(n * 1000 / workload.rate_per_s), "arrive")
        for slot in range(workload.processes * workload.slots):
            self._at(now, "claim", (slot, 0))
        self._at(now + RELAY_POLL_MS, "relay")
        self._at(now + PROJECTOR_POLL_MS, "project")
        done = 0
        while done < workload.jobs:
            at, _, kind, payload = heapq.heappop(self._queue)
            self.clock.now = max(self.clock.now, at)
            if kind == "arrive":
                with self.api_calls.one(1, self.meter):
                    self.api.create(self.rng.choice(workload.tenants), workload.job())
            elif kind == "claim":
                self._claim(*payload)
            elif kind == "finish":
                slot, lease = payload
                self.processes[slot % workload.processes].complete(lease, RESULT)
                done += 1
                self._at(self.clock.now, "claim", (slot, 0))
            elif kind == "relay":
                _drain(relay)
                self._at(self.clock.now + RELAY_POLL_MS, "relay")
            else:
                _drain(projector)
                self._at(self.clock.now + PROJECTOR_POLL_MS, "project")
        for poller in (relay, projector):  # what the last jobs wrote reaches the view
            _drain(poller)

    def _claim(self, slot: int, empty: int) -> None:
        store = self.processes[slot % self.workload.processes]
        lease: Lease | None = store.claim(f"bench-{slot}", LEASE_S, polling=True)
        if lease is None:
            self.empty_claims += 1
            self._at(self.clock.now + int(IDLE.delay(empty + 1, self.rng) * 1000), "claim", (slot, empty + 1))
            return
        self._at(self.clock.now + self.rng.randint(*JOB_MS), "finish", (slot, lease))


def _drain(poller: OutboxStreamPoller | EventsStreamPoller) -> None:
    """Poll until a poll takes nothing: Lambda's mapping invoking batch after batch while records wait."""
    while poller.poll_once():
        pass
