"""The event path on this machine: outbox stream -> relay handler -> Kinesis -> projector handler -> view,
and Kinesis -> archiver handler -> the archive (when the deployment has one: ONWARD_ARCHIVE_DIR), driven by
the local event-source pollers. The handlers take their Deployment from the environment, as on
Lambda (onward/bootstrap.py): the caller puts the deployment's environment in os.environ first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onward.bootstrap import Deployment
from onward.entrypoints import archiver as archiver_handler
from onward.entrypoints import fence_reconciler as fence_reconciler_handler
from onward.entrypoints import projector as projector_handler
from onward.entrypoints import relay as relay_handler
from onward.entrypoints import webhook_matcher
from onward.pipeline.heartbeat_writer import HeartbeatEmitter
from onward.pipeline.relay.relay import Relay
from onward.settings import Settings
from onward_infra.pollers import EventsStreamPoller, FailureHandling, JobsStreamPoller, OutboxStreamPoller
from onward_infra.pollers.failures import QueueDestination
from onward_infra.template import stream_error_handling


@dataclass
class LocalPipeline:
    relay_poller: OutboxStreamPoller
    projector_poller: EventsStreamPoller
    heartbeats: HeartbeatEmitter  # the platform beats on a schedule; a drill beats when it wants a watermark
    # The archiver's own mapping on the events stream (its own position); None when the deployment archives nothing.
    archiver_poller: EventsStreamPoller | None = None
    # The webhook matcher's own mapping on the events stream; None when the deployment has no webhook queue.
    webhooks_poller: EventsStreamPoller | None = None
    # The fence reconciler's mapping on the jobs table's stream (issue 39); None when the table has no stream.
    reconciler_poller: JobsStreamPoller | None = None

    @property
    def pollers(self) -> list[OutboxStreamPoller | EventsStreamPoller]:
        return [self.relay_poller, self.projector_poller,
                *[poller for poller in (self.archiver_poller, self.webhooks_poller, self.reconciler_poller)
                  if poller is not None]]

    @classmethod
    def of(cls, deployment: Deployment, batch_size: int = 100) -> LocalPipeline:
        """The pollers over this deployment's clients, a relay given its outbox (to recover from a trimmed
        stream), its checkpoint table (for their own positions) and its parked records, delivering batches of
        up to `batch_size` records, handling a failed batch as template.yaml's mappings do (bisected, retried a
        bounded number of times, records too old given up: onward_infra.pollers.failures), what they give up
        sent to the stack's on-failure queues when the settings name them."""
        outbox_table = deployment.settings.require("outbox_table")
        outbox = deployment.client("dynamodb").describe_table(TableName=outbox_table)["Table"]
        parked = deployment.parked_records
        relay_queue, projector_queue = (deployment.settings.relay_failures_queue,
                                        deployment.settings.projector_failures_queue)
        events_arn = deployment.client("kinesis").describe_stream_summary(
            StreamName=deployment.settings.require("events_stream"))["StreamDescriptionSummary"]["StreamARN"]
        relay_poller = OutboxStreamPoller(deployment.client("dynamodbstreams"), outbox["LatestStreamArn"],
                                          relay_handler.handler, Relay(deployment.events_publisher,
                                          deployment.checkpoint_store, parked, deployment.outbox_reader),
                                          deployment.checkpoint_store, batch_size=batch_size, parked=parked,
                                          handling=FailureHandling(**stream_error_handling("RelayFunction")),
                                          on_failure=QueueDestination(
                                              deployment.client("sqs"), relay_queue, outbox["LatestStreamArn"],
                                              "DDBStreamBatchInfo", "onward-relay") if relay_queue else None)
        projector_poller = EventsStreamPoller(deployment.client("kinesis"),
                                              deployment.settings.require("events_stream"),
                                              projector_handler.handler, deployment.checkpoint_store,
                                              batch_size=batch_size, parked=parked,
                                              handling=FailureHandling(**stream_error_handling("ProjectorFunction")),
                                              on_failure=QueueDestination(
                                                  deployment.client("sqs"), projector_queue, events_arn,
                                                  "KinesisBatchInfo", "onward-projector") if projector_queue else None)
        archiver_poller = None
        if deployment.archive_sink is not None:
            # What it gives up goes to the stack's ArchiverFailuresQueue when the environment names it (the local
            # stack's exports do), as on AWS; else the poller logs it (failures.py).
            archiver_queue = deployment.environ.get("ARCHIVER_FAILURES_QUEUE")
            archiver_poller = EventsStreamPoller(deployment.client("kinesis"),
                                                 deployment.settings.require("events_stream"),
                                                 archiver_handler.handler, deployment.checkpoint_store,
                                                 batch_size=batch_size, consumer="local-mapping:archiver",
                                                 handling=FailureHandling(**stream_error_handling("ArchiverFunction")),
                                                 on_failure=QueueDestination(
                                                     deployment.client("sqs"), archiver_queue, events_arn,
                                                     "KinesisBatchInfo", "onward-archiver") if archiver_queue else None,
                                                 function_name="onward-archiver")
        webhooks_poller = None
        if deployment.settings.webhook_deliveries_queue is not None:
            matcher_queue = deployment.environ.get("WEBHOOK_MATCHER_FAILURES_QUEUE")
            webhooks_poller = EventsStreamPoller(deployment.client("kinesis"),
                                                 deployment.settings.require("events_stream"),
                                                 webhook_matcher.handler, deployment.checkpoint_store,
                                                 batch_size=batch_size, consumer="local-mapping:webhooks",
                                                 handling=FailureHandling(
                                                     **stream_error_handling("WebhookMatcherFunction")),
                                                 on_failure=QueueDestination(
                                                     deployment.client("sqs"), matcher_queue, events_arn,
                                                     "KinesisBatchInfo", "onward-webhook-matcher")
                                                 if matcher_queue else None,
                                                 function_name="onward-webhook-matcher")
        return cls(relay_poller, projector_poller, deployment.heartbeat_emitter, archiver_poller, webhooks_poller,
                   reconciler_poller_of(deployment, batch_size))

    @classmethod
    def build(cls, settings: Settings, clients: dict[str, Any], batch_size: int = 100) -> LocalPipeline:
        """A pipeline over these clients ("dynamodb", "dynamodbstreams", "kinesis"), as after a restart:
        a Deployment of its own, no position in memory."""
        return cls.of(Deployment(settings, clients=clients), batch_size)

    def write_positions(self) -> None:
        """Store the pollers' positions not stored yet (they write them at most once a second while busy):
        call it once none is polling, so that a graceful stop leaves exact positions."""
        for poller in self.pollers:
            poller.write_positions()

    def drain(self, max_rounds: int = 10_000, *, beat: bool = False) -> int:
        """Poll relay, projector and archiver until a full round takes nothing; the records delivered or parked.
        With `beat`, a heartbeat is committed first, so the watermarks vouch for everything committed
        before the call. Raises when a shard is failing then (the pollers isolate it, so it would otherwise
        go unseen)."""
        if beat:
            self.heartbeats.emit()
        total = 0
        for _ in range(max_rounds):
            delivered = sum(poller.poll_once() for poller in self.pollers)
            total += delivered
            if not delivered:
                failing = set().union(*(poller.failing_shards for poller in self.pollers))
                if failing:
                    raise RuntimeError(f"shards failing, not drained: {sorted(failing)}")
                return total
        raise RuntimeError(f"still delivering after {max_rounds} rounds")


def reconciler_poller_of(deployment: Deployment, batch_size: int = 100) -> JobsStreamPoller | None:
    """The fence reconciler's poller on the deployment's jobs table's stream (issue 39), or None when the table
    has no stream (a stack deployed without `jobs_stream`, before template.yaml turns it on)."""
    jobs = deployment.client("dynamodb").describe_table(TableName=deployment.settings.require("jobs_table"))["Table"]
    if "LatestStreamArn" not in jobs:
        return None
    return JobsStreamPoller(deployment.client("dynamodbstreams"), jobs["LatestStreamArn"],
                            fence_reconciler_handler.handler, None, deployment.checkpoint_store,
                            batch_size=batch_size, consumer="local-mapping:fence-reconciler")
