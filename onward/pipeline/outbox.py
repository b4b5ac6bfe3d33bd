"""Reading the outbox: one job's events, a window of time (the `by_time` index), or everything.

The outbox is the retained history of every committed transition; replay, rebuild and the relay's
recovery from a trimmed stream all read it here. Pipeline heartbeats (onward.pipeline.heartbeats) and progress
events (onward.store.dynamo.progress_items) share the table and are never returned as transition events.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from onward.domain.models import OutboxEvent
from onward.domain.schema_versions import EVENT_SCHEMA, check_major
from onward.pipeline.heartbeats import is_heartbeat_image
from onward.store.dynamo.attributes import Item, from_item
from onward.store.dynamo.keys import time_buckets
from onward.store.dynamo.progress_items import is_progress_image

_STORAGE_ONLY = ("time_bucket", "expires_at")
MAX_WINDOW_HOURS = 7 * 24  # past this, one scan costs less than an index query per hour


def event_from_image(image: Item) -> OutboxEvent:
    """The event an outbox item (DynamoDB wire format, e.g. a stream record's NewImage) holds, its unknown
    fields kept as they came; NewerSchema for an event of a major this code does not read yet."""
    values = {name: value for name, value in from_item(image).items() if name not in _STORAGE_ONLY}
    check_major("outbox event", values.get("schema"), EVENT_SCHEMA)
    return OutboxEvent.model_validate(values)


def _parse(moment: str) -> datetime:
    return datetime.fromisoformat(moment.replace("Z", "+00:00"))


class OutboxReader:
    def __init__(self, client: Any, table: str) -> None:
        self._db = client
        self._table = table

    def events_of(self, job_id: str) -> list[OutboxEvent]:
        """A job's events in version order."""
        return [event_from_image(item) for item in self._query(
            KeyConditionExpression="job_id = :j", ExpressionAttributeValues={":j": {"S": job_id}},
            ConsistentRead=True) if not is_progress_image(item)]

    def window(self, since: str, until: str) -> Iterator[OutboxEvent]:
        """Events committed in [since, until] (ISO-8601 UTC): one query per time shard of each hour of the
        `by_time` index, merged in time order; a window longer than MAX_WINDOW_HOURS is read with one filtered
        scan instead."""
        start, end = _parse(since), _parse(until)
        if end - start > timedelta(hours=MAX_WINDOW_HOURS):
            pages = self._db.get_paginator("scan").paginate(
                TableName=self._table,
                FilterExpression="occurred_at BETWEEN :s AND :u",
                ExpressionAttributeValues={":s": {"S": since}, ":u": {"S": until}},
            )
            events = [event_from_image(item) for page in pages for item in page["Items"]
                      if not is_heartbeat_image(item) and not is_progress_image(item)]
            yield from sorted(events, key=lambda event: (event.occurred_at, event.job_id, event.version))
            return
        hour = start.replace(minute=0, second=0, microsecond=0)
        while hour <= end:
            shards = [self._query(
                IndexName="by_time",
                KeyConditionExpression="time_bucket = :b AND occurred_at BETWEEN :s AND :u",
                ExpressionAttributeValues={":b": {"S": bucket}, ":s": {"S": since}, ":u": {"S": until}},
            ) for bucket in time_buckets(hour.strftime("%Y-%m-%dT%H"))]
            for item in heapq.merge(*shards, key=lambda item: item["occurred_at"]["S"]):
                yield event_from_image(item)
            hour += timedelta(hours=1)

    def all(self) -> Iterator[OutboxEvent]:
        """Every retained event (a full scan: for rebuilds and audits, not for hot paths)."""
        for page in self._db.get_paginator("scan").paginate(TableName=self._table):
            for item in page["Items"]:
                if not is_heartbeat_image(item) and not is_progress_image(item):
                    yield event_from_image(item)

    def _query(self, **query: Any) -> Iterator[Item]:
        for page in self._db.get_paginator("query").paginate(TableName=self._table, **query):
            yield from page["Items"]
