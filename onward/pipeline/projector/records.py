"""What a record of the events stream is: a job's transition event, a running attempt's progress event
(onward.domain.progress), or a pipeline heartbeat; anything else is unreadable and parked with the reason."""

from __future__ import annotations

import json

from pydantic import ValidationError

from onward.domain.models import OutboxEvent
from onward.domain.progress import PROGRESS_KIND, PROGRESS_SCHEMA, ProgressEvent
from onward.domain.schema_versions import EVENT_SCHEMA, NewerSchema, UnknownSchema, check_major
from onward.pipeline.heartbeats import Heartbeat, decode_heartbeat


class UnreadableRecord(ValueError):
    """A record that is not a valid event of a schema this projector knows; it is parked with the reason. An
    event of a newer major (onward.domain.schema_versions) is one: the upgraded projector re-drives it."""


def parse_record(data: bytes) -> OutboxEvent | Heartbeat | ProgressEvent:
    """A record's job event, a progress event, or a pipeline heartbeat; UnreadableRecord says why it is none.
    Consumers that show no progress skip a ProgressEvent as they skip a Heartbeat."""
    try:
        payload = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UnreadableRecord(f"not JSON: {error}") from error
    if not isinstance(payload, dict):
        raise UnreadableRecord("not a JSON object")
    try:
        heartbeat = decode_heartbeat(payload)
    except ValidationError as error:
        raise UnreadableRecord(f"invalid heartbeat: {error.errors()[0]['msg']}") from error
    if heartbeat is not None:
        return heartbeat
    if payload.get("kind") == PROGRESS_KIND:
        return _progress(payload)
    try:
        check_major("event", payload.get("schema"), EVENT_SCHEMA)
    except (NewerSchema, UnknownSchema) as error:
        raise UnreadableRecord(str(error)) from error
    try:
        return OutboxEvent.model_validate(payload)
    except ValidationError as error:
        raise UnreadableRecord(f"invalid event: {error.error_count()} errors: {error.errors()[0]['msg']}") from error


def _progress(payload: dict[str, object]) -> ProgressEvent:
    try:
        check_major("progress event", payload.get("schema"), PROGRESS_SCHEMA)
    except (NewerSchema, UnknownSchema) as error:
        raise UnreadableRecord(str(error)) from error
    try:
        return ProgressEvent.model_validate(payload)
    except ValidationError as error:
        raise UnreadableRecord(f"invalid progress event: {error.errors()[0]['msg']}") from error
