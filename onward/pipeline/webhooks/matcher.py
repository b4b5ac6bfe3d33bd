"""The webhook matcher: a consumer of the events stream with its own position (its own function and event
source mapping, like the archiver). For each batch: each event's tenant's endpoints (read at most once per
ONWARD_WEBHOOK_ENDPOINT_CACHE_S per tenant: onward.pipeline.webhooks.endpoint_cache), one delivery per endpoint
that wants the event's status, recorded (put only where none of its id is), then every pending one queued for
the deliverer (SendMessageBatch, 10 a request). It never calls an endpoint: a slow one cannot hold the stream.

The batch is acknowledged only once the queue took its messages: a crash between record and queue redelivers
the batch, whose deliveries are found recorded and queued again (never sent twice by that alone: the deliverer
reads the record and drops a message whose delivery is settled).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from onward.domain.clock import Clock, system_clock
from onward.domain.models import OutboxEvent
from onward.domain.webhooks import DEFAULT_RETRY_POLICY, DeliveryState, RetryPolicy, Webhook, deliveries_for
from onward.faults import fault_point
from onward.pipeline.projector.records import UnreadableRecord, parse_record
from onward.pipeline.webhooks.endpoint_cache import EndpointCache
from onward.pipeline.webhooks.queue import SEND_BATCH, DeliveryQueue, DeliveryRef
from onward.store.webhooks import WebhookRecorder

T = TypeVar("T")
_readers = ThreadPoolExecutor(max_workers=8, thread_name_prefix="onward-webhook-matcher")


_CHUNKS = 8


def _chunks(items: list[T]) -> list[list[T]]:
    """`items` in at most _CHUNKS lists of about the same size, in order."""
    size = max(1, -(-len(items) // _CHUNKS))
    return [items[start:start + size] for start in range(0, len(items), size)]


@dataclass
class MatchTally:
    events: int = 0
    recorded: int = 0
    queued: int = 0
    unreadable: int = 0


class WebhookMatcher:
    def __init__(self, store: WebhookRecorder, queue: DeliveryQueue, policy: RetryPolicy = DEFAULT_RETRY_POLICY,
                 clock: Clock = system_clock, endpoint_cache_ms: int = 0) -> None:
        self._store = store
        self._queue = queue
        self._policy = policy
        self._clock = clock
        self.endpoints = EndpointCache(store, endpoint_cache_ms, clock)

    def match_batch(self, records: Sequence[bytes], tally: MatchTally | None = None) -> MatchTally:
        """Record and queue the batch's deliveries; returns once the queue holds them (raises otherwise: the
        batch is to be delivered again). Passes the fault point `webhooks.after_record` between the two."""
        tally = tally if tally is not None else MatchTally()
        events: list[OutboxEvent] = []
        for data in records:
            try:
                read = parse_record(data)
            except UnreadableRecord:
                tally.unreadable += 1  # the projector parks these
                continue
            if isinstance(read, OutboxEvent):
                events.append(read)
        tally.events += len(events)
        tenants = sorted({event.tenant_id for event in events})
        endpoints: dict[str, list[Webhook]] = dict(zip(tenants, _readers.map(self.endpoints.of_tenant, tenants),
                                                       strict=True))
        now = self._clock()
        wanted = [delivery for event in events
                  for delivery in deliveries_for(event, endpoints[event.tenant_id], now, self._policy)]
        if not wanted:
            return tally
        # each delivery is its own write and its own message: sent at once, not one after another
        stored = [d for chunk in _readers.map(self._store.record, _chunks(wanted)) for d in chunk]
        tally.recorded += len(stored)
        fault_point("webhooks.after_record", wanted[0].job_id)
        pending = [DeliveryRef(d.tenant_id, d.webhook_id, d.delivery_id) for d in stored
                   if d.state is DeliveryState.PENDING]
        # whole SendMessageBatch requests, sent at once
        batches = [pending[start:start + SEND_BATCH] for start in range(0, len(pending), SEND_BATCH)]
        for _ in _readers.map(self._queue.enqueue, batches):
            pass  # raises what a send raised: the batch is then delivered again
        tally.queued += len(pending)
        return tally
