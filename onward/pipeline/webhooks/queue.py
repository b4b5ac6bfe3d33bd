"""The queue between the matcher and the deliverer: one message per delivery to send (now, or after a delay for a
retry). On AWS and on the local stack an SQS queue (`SqsDeliveryQueue`: WEBHOOK_DELIVERIES_QUEUE), a fair queue
whose MessageGroupId is the tenant, so a tenant with a backlog does not raise the others' dwell time
(https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-fair-queues.html); in memory for
tests (`MemoryDeliveryQueue`). A message only names the delivery: its record (onward.store.webhooks) is the truth,
so a message seen twice or late changes nothing once the delivery moved on.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from onward.domain.clock import Clock, system_clock

MAX_SQS_DELAY_S = 900  # SQS's largest DelaySeconds / visibility step; a longer wait is taken in steps
SEND_BATCH = 10  # SendMessageBatch's most entries a request
SEND_TRIES = 4  # a batch's failed entries are sent again up to this many times in all
SEND_RETRY_S = 0.05  # the first wait before sending failed entries again, doubled each time


class SendFailed(Exception):
    """Messages the queue did not take after SEND_TRIES sends: their ids and SQS's codes."""


@dataclass(frozen=True)
class DeliveryRef:
    """Which delivery a message is about."""

    tenant_id: str
    webhook_id: str
    delivery_id: str

    def body(self) -> str:
        return json.dumps({"tenant_id": self.tenant_id, "webhook_id": self.webhook_id,
                           "delivery_id": self.delivery_id}, separators=(",", ":"))

    @classmethod
    def of_body(cls, body: str) -> DeliveryRef:
        values = json.loads(body)
        return cls(str(values["tenant_id"]), str(values["webhook_id"]), str(values["delivery_id"]))


@dataclass(frozen=True)
class Received:
    ref: DeliveryRef
    receipt: str


class DeliveryQueue(Protocol):
    def enqueue(self, refs: list[DeliveryRef], delay_ms: int = 0) -> None:
        """Queue each ref, visible after `delay_ms` (at most MAX_SQS_DELAY_S on SQS; the deliverer waits again
        for what is left)."""

    def receive(self, limit: int, wait_s: float) -> list[Received]: ...

    def acknowledge(self, receipt: str) -> None:
        """The message's delivery needs nothing more from it."""

    def show_later(self, receipt: str, delay_ms: int) -> None:
        """Show the message again after `delay_ms` (its endpoint was busy)."""


def send_batch(sqs: Any, url: str, entries: list[dict[str, Any]], sleep: Callable[[float], None] = time.sleep,
               ) -> int:
    """Send up to SEND_BATCH entries with SendMessageBatch, again for the entries SQS answers as failed
    (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessageBatch.html: a batch
    can succeed in part, each failure in `Failed` with its Id); the requests it took. SendFailed when some are
    still failed after SEND_TRIES sends (a sender's fault, such as a body SQS refuses, is not sent again)."""
    pending = entries
    for attempt in range(SEND_TRIES):
        if attempt:
            sleep(SEND_RETRY_S * 2 ** (attempt - 1))
        answer = sqs.send_message_batch(QueueUrl=url, Entries=pending)
        failed = answer.get("Failed") or []
        if not failed:
            return attempt + 1
        if any(failure.get("SenderFault") for failure in failed):
            break
        again = {failure["Id"] for failure in failed}
        pending = [entry for entry in pending if entry["Id"] in again]
    raise SendFailed(", ".join(f"{failure['Id']}: {failure.get('Code')}" for failure in failed))


def _delay_s(delay_ms: int) -> int:
    return max(0, min(MAX_SQS_DELAY_S, math.ceil(delay_ms / 1000)))


class SqsDeliveryQueue:
    def __init__(self, client: Any, url: str, *, fair: bool = True) -> None:
        self._sqs = client
        self._url = url
        self._fair = fair

    def enqueue(self, refs: list[DeliveryRef], delay_ms: int = 0) -> None:
        """SendMessageBatch, SEND_BATCH messages a request; the entries a batch failed are sent again, up to
        SEND_TRIES times in all, and SendFailed names what is still not queued (the matcher's batch is then
        delivered again: nothing is acknowledged that the queue does not hold)."""
        entries = [{"Id": str(index), "MessageBody": ref.body(), "DelaySeconds": _delay_s(delay_ms),
                    **({"MessageGroupId": ref.tenant_id} if self._fair else {})} for index, ref in enumerate(refs)]
        for start in range(0, len(entries), SEND_BATCH):
            send_batch(self._sqs, self._url, entries[start:start + SEND_BATCH])

    def receive(self, limit: int, wait_s: float) -> list[Received]:
        answer = self._sqs.receive_message(QueueUrl=self._url, MaxNumberOfMessages=max(1, min(10, limit)),
                                           WaitTimeSeconds=int(wait_s))
        return [Received(DeliveryRef.of_body(message["Body"]), message["ReceiptHandle"])
                for message in answer.get("Messages", [])]

    def acknowledge(self, receipt: str) -> None:
        self._sqs.delete_message(QueueUrl=self._url, ReceiptHandle=receipt)

    def show_later(self, receipt: str, delay_ms: int) -> None:
        self._sqs.change_message_visibility(QueueUrl=self._url, ReceiptHandle=receipt,
                                           VisibilityTimeout=_delay_s(delay_ms))


class MemoryDeliveryQueue:
    """The queue in memory: a message taken and not done shows again after `visibility_ms`, as SQS's does."""

    def __init__(self, clock: Clock = system_clock, visibility_ms: int = 30_000) -> None:
        self._clock = clock
        self._visibility_ms = visibility_ms
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._heap: list[tuple[int, int, DeliveryRef]] = []  # (visible at, message id, ref)
        self._taken: dict[str, tuple[int, DeliveryRef]] = {}  # receipt -> (message id, ref)
        self.sent = 0

    def enqueue(self, refs: list[DeliveryRef], delay_ms: int = 0) -> None:
        with self._lock:
            for ref in refs:
                heapq.heappush(self._heap, (self._clock() + delay_ms, next(self._ids), ref))
                self.sent += 1

    def receive(self, limit: int, wait_s: float = 0) -> list[Received]:
        now = self._clock()
        found: list[Received] = []
        with self._lock:
            while self._heap and self._heap[0][0] <= now and len(found) < limit:
                _, message, ref = heapq.heappop(self._heap)
                receipt = f"{message}:{next(self._ids)}"
                self._taken[receipt] = (message, ref)
                heapq.heappush(self._heap, (now + self._visibility_ms, message, ref))  # shows again unless done
                found.append(Received(ref, receipt))
        return found

    def acknowledge(self, receipt: str) -> None:
        with self._lock:
            taken = self._taken.pop(receipt, None)
            if taken is not None:
                self._heap = [entry for entry in self._heap if entry[1] != taken[0]]
                heapq.heapify(self._heap)

    def show_later(self, receipt: str, delay_ms: int) -> None:
        with self._lock:
            taken = self._taken.pop(receipt, None)
            if taken is not None:
                self._heap = [entry for entry in self._heap if entry[1] != taken[0]]
                heapq.heappush(self._heap, (self._clock() + delay_ms, taken[0], taken[1]))

    def __len__(self) -> int:
        with self._lock:
            return len(self._heap)
