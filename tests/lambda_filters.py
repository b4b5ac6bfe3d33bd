"""Lambda's event filtering of Kinesis records, offline: what a mapping's FilterCriteria lets through to the
function. For Kinesis, Lambda filters on the `data` key only: the record's base64 data is decoded and, when it
is JSON, matched against each filter's pattern (the EventBridge pattern grammar, evaluated here by moto's
implementation of it); a record passes when any pattern matches; data that is not JSON matches no pattern on
its fields. A batch with no record left is not delivered at all.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from moto.events.models import EventPattern

from onward_infra.template import load_template


def mapping_filters(function: str, event_name: str) -> list[dict[str, str]]:
    """The FilterCriteria filters of one of `function`'s events in template.yaml."""
    event = load_template()["Resources"][function]["Properties"]["Events"][event_name]
    filters: list[dict[str, str]] = event["Properties"]["FilterCriteria"]["Filters"]
    return filters


def data_passes(filters: list[dict[str, str]], data: bytes) -> bool:
    """Whether a Kinesis record carrying `data` (raw bytes) reaches the function."""
    try:
        decoded: Any = json.loads(data)
    except ValueError:
        return False
    return any(EventPattern.load(f["Pattern"]).matches_event({"data": decoded}) for f in filters)


def record_passes(filters: list[dict[str, str]], record: dict[str, Any]) -> bool:
    """Whether one record of a Lambda Kinesis event (data in base64) reaches the function."""
    return data_passes(filters, base64.b64decode(record["kinesis"]["data"]))


def filtered(filters: list[dict[str, str]], event: dict[str, Any]) -> dict[str, Any] | None:
    """The event Lambda delivers after filtering `event`'s records, or None when none passes."""
    kept = [record for record in event["Records"] if record_passes(filters, record)]
    return {**event, "Records": kept} if kept else None
