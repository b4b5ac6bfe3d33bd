"""The stream mappings' on-failure queues: what a mapping gave up (MaximumRetryAttempts spent, or records older than
MaximumRecordAgeInSeconds) reaches them as METADATA only: the shard, the sequence numbers and the arrival times of
the first and last record of the batch, never the records. The consumers park a record that keeps failing before
that (onward/pipeline/poison.py), so a message here means a record could not even be parked.

`onward redrive` drains them: each message's window (its records' arrival times, widened by RECOVERY_MARGIN_MS on
both sides: an event occurred, and was committed, before it arrived on a stream, and by another clock, which the
arrival times may round) is re-published from the outbox, and the message deleted once the whole window went out.
A replay is idempotent (the projector's version guard): re-publishing more than was given up costs duplicates only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from onward.domain.clock import EpochMs, parse_instant
from onward.pipeline.outbox import OutboxReader
from onward.pipeline.relay.publisher import KinesisPublisher
from onward.pipeline.relay.relay import RECOVERY_MARGIN_MS
from onward.pipeline.relay.replay import ReplaySelection, replay

BATCH_INFO = ("KinesisBatchInfo", "DDBStreamBatchInfo")  # the projector's mapping's, the relay's


@dataclass
class QueueDrain:
    """What draining one queue did."""

    messages: int = 0  # messages read
    replayed: int = 0  # messages whose window went out whole (deleted)
    selected: int = 0  # events in their windows
    published: int = 0
    unreadable: int = 0  # messages naming no window (left in the queue)


def skipped_window(body: str) -> tuple[EpochMs, EpochMs] | None:
    """The outbox window that holds the records a message names: from the first record's arrival less the
    margin to the last record's arrival plus the margin; None for a message that names no batch."""
    try:
        message = json.loads(body)
        info = next(message[name] for name in BATCH_INFO if name in message)
        first = parse_instant(info["approximateArrivalOfFirstRecord"])
        last = parse_instant(info["approximateArrivalOfLastRecord"])
    except (ValueError, TypeError, KeyError, StopIteration):
        return None
    return first - RECOVERY_MARGIN_MS, last + RECOVERY_MARGIN_MS


class FailureQueue:
    """A mapping's on-failure queue (`url`: its URL, from the settings)."""

    def __init__(self, sqs: Any, url: str) -> None:
        self._sqs = sqs
        self._url = url

    def messages_waiting(self) -> int:
        """Messages in the queue (approximately, as SQS counts them)."""
        answer = self._sqs.get_queue_attributes(QueueUrl=self._url, AttributeNames=["ApproximateNumberOfMessages"])
        return int(answer["Attributes"]["ApproximateNumberOfMessages"])

    def replay_skipped_batches(self, reader: OutboxReader, publisher: KinesisPublisher) -> QueueDrain:
        """Replay the window of every message of the queue; delete each message whose window went out whole."""
        done = QueueDrain()
        while True:
            messages = self._sqs.receive_message(QueueUrl=self._url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                                 VisibilityTimeout=300).get("Messages", [])
            if not messages:
                return done
            for message in messages:
                done.messages += 1
                window = skipped_window(message["Body"])
                if window is None:
                    done.unreadable += 1
                    continue
                summary = replay(reader, publisher, ReplaySelection(since=window[0], until=window[1]))
                done.selected += summary.selected
                done.published += summary.published
                if summary.published == summary.selected:
                    self._sqs.delete_message(QueueUrl=self._url, ReceiptHandle=message["ReceiptHandle"])
                    done.replayed += 1
