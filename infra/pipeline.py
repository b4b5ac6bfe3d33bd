"""The event path on this machine: outbox stream -> relay handler -> Kinesis -> projector handler -> view,
driven by the local event-source pollers. The handlers read their resources from the environment, as on
Lambda: the caller puts the deployment's environment in os.environ first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.pollers import EventsStreamPoller, OutboxStreamPoller
from onward.checkpoints import CheckpointStore
from onward.parking import ParkedRecords
from onward.settings import Settings
from projector import app as projector_app
from relay import app as relay_app


@dataclass
class LocalPipeline:
    relay_poller: OutboxStreamPoller
    projector_poller: EventsStreamPoller

    @classmethod
    def build(cls, settings: Settings, clients: dict[str, Any], batch_size: int = 100) -> LocalPipeline:
        outbox = clients["dynamodb"].describe_table(TableName=settings.require("outbox_table"))["Table"]
        parked = ParkedRecords(clients["dynamodb"], settings.require("parked_table"))
        relay_poller = OutboxStreamPoller(clients["dynamodbstreams"], outbox["LatestStreamArn"], relay_app.handler,
                                          relay_app.build_relay(), batch_size=batch_size, parked=parked)
        projector_poller = EventsStreamPoller(
            clients["kinesis"], settings.require("events_stream"), projector_app.handler,
            CheckpointStore(clients["dynamodb"], settings.require("checkpoint_table")), batch_size=batch_size,
            parked=parked,
        )
        return cls(relay_poller, projector_poller)

    def drain(self, max_rounds: int = 10_000) -> int:
        """Poll relay and projector until a full round takes nothing; the records delivered or parked.
        Raises when a shard is failing then (the pollers isolate it, so it would otherwise go unseen)."""
        total = 0
        for _ in range(max_rounds):
            delivered = self.relay_poller.poll_once() + self.projector_poller.poll_once()
            total += delivered
            if not delivered:
                failing = self.relay_poller.failing_shards | self.projector_poller.failing_shards
                if failing:
                    raise RuntimeError(f"shards failing, not drained: {sorted(failing)}")
                return total
        raise RuntimeError(f"still delivering after {max_rounds} rounds")
