"""What every route answers with: JSON bodies of the contract, and refusals as application/problem+json
(`Problem`), the core's errors mapped to them by one rule (`problem_of`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.event_handler import Response
from pydantic import BaseModel

from onward.api.contract.common import ProblemDetails
from onward.api.observability import logger
from onward.domain.errors import (
    ConcurrencyLimitReached,
    IdempotencyConflict,
    InvalidRequest,
    JobNotFound,
    NotReplayable,
    OnwardError,
    PayloadTooLarge,
    StoreContention,
    UniqueKeyHeld,
)

# The answers of the API are per caller and change with every poll: no cache may keep them.
NO_STORE = {"Cache-Control": "no-store"}
PROBLEM_JSON = "application/problem+json"


class Problem(Exception):
    """An HTTP answer as application/problem+json."""

    def __init__(self, status: int, title: str, detail: str, *, slug: str | None = None,
                 extra: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.slug = slug or title.lower().replace(" ", "-")
        self.extra = dict(extra or {})
        self.headers = dict(headers or {})

    def details(self) -> ProblemDetails:
        return ProblemDetails(type=f"https://onward.dev/problems/{self.slug}", title=self.title, status=self.status,
                              detail=self.detail, **self.extra)

    def response(self) -> Response[str]:
        return Response(self.status, PROBLEM_JSON, self.details().model_dump_json(exclude_none=True),
                        headers={**NO_STORE, **self.headers})


def not_found(job_id: str) -> Problem:
    # The same answer for a missing job and for another tenant's job: nothing tells them apart.
    return Problem(404, "Not found", f"no job {job_id!r}", slug="job-not-found")


def schedule_not_found(name: str) -> Problem:
    return Problem(404, "Not found", f"no schedule {name!r}", slug="schedule-not-found")


def no_such_file(name: str) -> Problem:
    """A file the status page does not have (the name is not repeated: it is not the caller's data)."""
    return Problem(404, "Not found", "no such file", slug="route-not-found")


def problem_of(error: OnwardError) -> Problem:
    """The answer to an error of the core: one mapping for every route (and each job of a bulk replay or entry of
    a batch)."""
    if isinstance(error, JobNotFound):
        return not_found(str(error.args[0]) if error.args else "")
    if isinstance(error, IdempotencyConflict):
        return Problem(409, "Idempotency conflict", "this Idempotency-Key was already used for a different request",
                       slug="idempotency-conflict")
    if isinstance(error, UniqueKeyHeld):  # unique jobs (issue 37)
        return Problem(409, "Unique key held", str(error), slug="unique-key-held",
                       extra={"existing_job_id": error.job_id})
    if isinstance(error, ConcurrencyLimitReached):  # concurrency keys (issue 37)
        return Problem(409, "Concurrency limit reached", str(error), slug="concurrency-limit-reached")
    if isinstance(error, NotReplayable):
        return Problem(409, "Not replayable", str(error), slug="not-replayable")
    if isinstance(error, PayloadTooLarge):
        return Problem(413, "Payload too large", str(error))
    if isinstance(error, InvalidRequest):
        return Problem(400, "Bad request", str(error))
    if isinstance(error, StoreContention):
        return Problem(503, "Busy", "the job is contended; retry shortly", headers={"Retry-After": "1"})
    logger.error("unexpected refusal of the core", extra={"error": type(error).__name__})
    return Problem(500, "Internal error", "the request failed; it is safe to retry with the same Idempotency-Key")


def json_answer(status: int, body: BaseModel | dict[str, Any], headers: Mapping[str, str] | None = None, *,
                exclude_none: bool = False) -> Response[str]:
    """An answer of the contract (onward.api.contract), or a document, as JSON."""
    text = body.model_dump_json(exclude_none=exclude_none) if isinstance(body, BaseModel) else json.dumps(body)
    return Response(status, "application/json", text, headers={**NO_STORE, **(headers or {})})
