"""The window `onward redrive` replays for a batch a mapping gave up (onward/operator/failure_queues.py), from the
metadata Lambda sends the on-failure queue: a message it cannot read is left in the queue, not guessed at."""

from __future__ import annotations

import json

import pytest

from onward.domain.clock import parse_instant
from onward.operator.failure_queues import skipped_window
from onward.pipeline.relay.relay import RECOVERY_MARGIN_MS

FIRST, LAST = "2026-12-04T08:00:00.250Z", "2026-12-04T08:00:03.500Z"


@pytest.mark.parametrize("info", ["KinesisBatchInfo", "DDBStreamBatchInfo"])
def test_the_window_spans_the_records_arrivals_with_a_margin_on_both_sides(info: str) -> None:
    body = json.dumps({"requestContext": {"condition": "RetryAttemptsExhausted"}, info: {
        "shardId": "shardId-000000000000", "startSequenceNumber": "1", "endSequenceNumber": "9", "batchSize": 9,
        "approximateArrivalOfFirstRecord": FIRST, "approximateArrivalOfLastRecord": LAST}})
    assert skipped_window(body) == (parse_instant(FIRST) - RECOVERY_MARGIN_MS, parse_instant(LAST) + RECOVERY_MARGIN_MS)


@pytest.mark.parametrize("body", ["not json", "[]", json.dumps({"requestContext": {}}),
                                  json.dumps({"KinesisBatchInfo": {"approximateArrivalOfFirstRecord": "yesterday",
                                                                   "approximateArrivalOfLastRecord": LAST}})])
def test_a_message_that_names_no_batch_gives_no_window(body: str) -> None:
    assert skipped_window(body) is None
