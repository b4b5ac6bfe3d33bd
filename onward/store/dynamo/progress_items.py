"""How a progress event (issue 38) is kept in the outbox table: its item, its key, and how a reader tells it
from a transition's event and reads it back.

The outbox is keyed (job_id, version), one event per version. A progress update of the job at version v gets
the sort key `v.<seq, 9 digits>` (v + seq / 10^9): in the job's partition, so the outbox stream carries it
behind the transition it follows and ahead of the next one (stream records of one partition key keep their
order), sorted between those two events, and never equal to a version. It has no `time_bucket` (replay of a
window and the claim log skip it) and carries `kind: progress`, by which every reader of the table
(onward.pipeline.outbox, the relay, the history) tells it from a transition's event. The job's version it
applies to is its `job_version`.
"""

from __future__ import annotations

from typing import Final

from onward.domain.progress import PROGRESS_KIND, SEQ_SPACE, ProgressEvent
from onward.store.dynamo.attributes import Item, from_item, to_attribute

JOB_VERSION: Final = "job_version"
_STORAGE_ONLY = ("version", "expires_at", JOB_VERSION)


def progress_sort_key(version: int, seq: int) -> str:
    """The outbox sort key (a DynamoDB number, as text) of update `seq` of the job at `version`."""
    if not 1 <= seq < SEQ_SPACE:
        raise ValueError(f"progress seq {seq} out of range")
    return f"{version}.{seq:09d}"


def progress_outbox_item(event: ProgressEvent, expires_at: int) -> Item:
    """The outbox item of `event` in DynamoDB's wire format (message and committed_at only when set)."""
    values = event.model_dump(mode="json", by_alias=True, exclude={"version", "committed_at"}, exclude_none=True)
    item: Item = {name: to_attribute(value) for name, value in values.items()}
    item["version"] = {"N": progress_sort_key(event.version, event.seq)}
    item[JOB_VERSION] = {"N": str(event.version)}
    item["expires_at"] = {"N": str(expires_at)}
    return item


def is_progress_image(image: Item) -> bool:
    """Whether an outbox item (DynamoDB wire format) is a progress event rather than a transition's."""
    kind: str | None = image.get("kind", {}).get("S")
    return kind == PROGRESS_KIND


def progress_from_image(image: Item) -> ProgressEvent:
    """The progress event an outbox item holds (ValidationError, KeyError for a malformed one)."""
    values = from_item(image)
    version = values[JOB_VERSION]
    return ProgressEvent.model_validate({**{name: value for name, value in values.items()
                                            if name not in _STORAGE_ONLY}, "version": version})
