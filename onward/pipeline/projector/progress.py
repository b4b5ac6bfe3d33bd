"""Progress events (onward.domain.progress) -> the status view: one conditional UpdateItem that sets the row's
`progress` and `progress_seq`, only while the row shows the event's version, running, of its attempt, with an
older `progress_seq` (the same rule as judge_progress, evaluated by DynamoDB). It never writes `version`,
`status` or anything a transition's event wrote, so no ordering of progress and transitions can move a status;
and the next transition's PutItem replaces the row whole, so a final status carries no progress.

A refusal returns the row (ALL_OLD) and is classified without a read: this very update already shown (a
redelivery) is a duplicate, anything else superseded. Neither is a conflict: a progress event is advice about
one version, and a view that moved past that version has nothing to learn from it. An update changes neither
the row's listing key nor the attributes the `by_listing` index projects, so it writes no index entry.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from onward.domain.progress import ProgressEvent, ProgressOutcome, judge_progress, latest_progress
from onward.domain.states import JobState
from onward.store.dynamo.attributes import from_item, to_attribute


class ProgressTally:
    """Progress events' outcomes in one batch, by outcome (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.outcomes: Counter[str] = Counter()

    def count(self, outcome: ProgressOutcome, events: int = 1) -> None:
        with self._lock:
            self.outcomes[outcome.value] += events


class ProgressWriter:
    def __init__(self, client: Any, status_table: str) -> None:
        self._db = client
        self._status = status_table

    def project(self, events: Sequence[ProgressEvent], after_version: int | None, tally: ProgressTally) -> None:
        """One job's progress events of a batch, once its transitions of the batch (the highest at
        `after_version`, None: none) are written: only the newest that can still apply is written; the others
        are counted superseded."""
        chosen = latest_progress(list(events), after_version)
        if len(events) > (chosen is not None):
            tally.count(ProgressOutcome.SUPERSEDED, len(events) - (chosen is not None))
        if chosen is not None:
            tally.count(self.write(chosen))

    def write(self, event: ProgressEvent) -> ProgressOutcome:
        """Show `event` on its job's row if the row is at its version, running, of its attempt, with an older
        update; else what the refusal means."""
        try:
            self._db.update_item(
                TableName=self._status,
                Key={"job_id": {"S": event.job_id}},
                UpdateExpression="SET progress = :p, progress_seq = :seq",
                ConditionExpression="version = :v AND #s = :running AND attempt = :a AND "
                                    "(attribute_not_exists(progress_seq) OR progress_seq < :seq)",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    ":p": to_attribute(event.shown().model_dump(mode="json")), ":seq": {"N": str(event.seq)},
                    ":v": {"N": str(event.version)}, ":running": {"S": JobState.RUNNING.value},
                    ":a": {"N": str(event.attempt)}},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            held = error.response.get("Item")
            outcome = judge_progress(from_item(held) if held else None, event)
            return ProgressOutcome.SUPERSEDED if outcome is ProgressOutcome.APPLIED else outcome
        return ProgressOutcome.APPLIED
