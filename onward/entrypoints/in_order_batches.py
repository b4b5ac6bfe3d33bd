"""Powertools' batch processing for a handler that takes a stream batch whole, in order, and answers its earliest
failure (onward.pipeline.projector.projector.BatchFailure, or None): that record and every one after it are
reported failed, every one before it succeeded. The stock processor handles records one at a time and goes on
past a failure, so an item's later record could be applied before an earlier one that failed
(powertools-lambda-python #2850). Used by the projector (Kinesis) and the fence reconciler (DynamoDB Streams)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.batch.base import FailureResponse, SuccessResponse

from onward.pipeline.projector.projector import BatchFailure


class EarlierRecordFailed(RuntimeError):
    """A record reported failed because one before it in the batch failed (other writes may have applied it
    already: its redelivery is then a duplicate)."""


class InOrderBatchProcessor(BatchProcessor):
    """The module's processor: `wrap` makes each raw record the handler's record, `sequence_of` names one."""

    def __init__(self, event_type: EventType, wrap: Callable[[dict[str, Any]], Any],
                 sequence_of: Callable[[Any], str]) -> None:
        super().__init__(event_type=event_type, raise_on_entire_batch_failure=False)
        self._wrap = wrap
        self._sequence_of = sequence_of

    def process(self) -> list[SuccessResponse | FailureResponse]:
        batch = [self._wrap(record) for record in self.records]
        failure: BatchFailure | None = self.handler(batch)
        answers: list[SuccessResponse | FailureResponse] = []
        for index, (raw, record) in enumerate(zip(self.records, batch, strict=True)):
            if failure is None or index < failure.index:
                answers.append(self.success_handler(record=raw, result=None))
                continue
            error = failure.error if index == failure.index else EarlierRecordFailed(self._sequence_of(record))
            answers.append(self.failure_handler(record=record, exception=(type(error), error, error.__traceback__)))
        return answers
