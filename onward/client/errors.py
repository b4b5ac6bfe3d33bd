"""What the client raises: each refusal of the API (application/problem+json) as a typed exception carrying its
problem document, a request that never got an answer, and a wait that ran out of time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from onward.client.models import Freshness, JobStatus


class FieldError(BaseModel):
    """One place a 422 names, and why (`loc`, e.g. ["body", "params", "a"])."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    loc: list[str | int] = Field(default_factory=list)
    msg: str = ""
    type: str = ""


class Problem(BaseModel):
    """A refusal's problem details (RFC 9457), as the API answers them; fields it adds later are kept."""

    model_config = ConfigDict(extra="allow", frozen=True)

    type: str = "about:blank"
    title: str = ""
    status: int = 0
    detail: str = ""
    errors: list[FieldError] | None = None
    job_status: str | None = None  # a 409 on cancel: how the job ended
    existing_job_id: str | None = None  # a 409 on create: the job holding `unique.key` (unique jobs, issue 37)


class OnwardClientError(Exception):
    """Anything the client raises about a call to the API."""


class ApiError(OnwardClientError):
    """The API refused the request: its HTTP status and its problem document."""

    def __init__(self, status: int, problem: Problem, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"{status} {problem.title}: {problem.detail}" if problem.title else f"HTTP {status}")
        self.status = status
        self.problem = problem
        self.headers = dict(headers or {})


class InvalidRequest(ApiError):
    """400, 413, 415 or 422: the request itself is wrong; `errors` names each place a 422 found."""

    @property
    def errors(self) -> list[FieldError]:
        return list(self.problem.errors or [])


class Unauthorized(ApiError):
    """401: no valid bearer token."""


class Forbidden(ApiError):
    """403: the credential may not do this (a replay by a tenant, another tenant named...)."""


class NotFound(ApiError):
    """404: no such job (or schedule) for this credential; another tenant's job is answered the same way."""


class Conflict(ApiError):
    """409: an Idempotency-Key used for another request, a job that already ended, one that does not replay, a
    schedule name taken, a `unique.key` held (`problem.existing_job_id` names the holder)."""


class RateLimited(ApiError):
    """429: the tenant is over its request quota; `retry_after` is the wait the API asked for (seconds), when it
    said one. Raised once the client's own retries are spent."""

    def __init__(self, status: int, problem: Problem, headers: dict[str, str] | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(status, problem, headers)
        self.retry_after = retry_after


class ServerError(ApiError):
    """5xx once the client's retries are spent (503: contention on the job; 500: unexpected, safe to retry)."""


class Unreachable(OnwardClientError):
    """No answer: the connection failed or timed out on every attempt. The cause is the last transport error."""


class WaitTimeout(OnwardClientError):
    """`wait` ran out of time before the job's status was final. `last` is the last status read (None: not a
    single answer came), with its freshness: a status that looks stuck may be a view that is behind."""

    def __init__(self, job_id: str, timeout_s: float, last: JobStatus | None) -> None:
        shown = "no status read" if last is None else f"last status {last.status or 'not visible yet'}"
        super().__init__(f"job {job_id} not final after {timeout_s:g} s ({shown})")
        self.job_id = job_id
        self.timeout_s = timeout_s
        self.last = last

    @property
    def freshness(self) -> Freshness | None:
        """The freshness of the last status (None: none read, or the view had not shown the job)."""
        return None if self.last is None else self.last.freshness


ERRORS_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 413: InvalidRequest,
    415: InvalidRequest, 422: InvalidRequest,
}


def api_error(status: int, body: Any, headers: dict[str, str], retry_after: float | None) -> ApiError:
    """The exception for a refusal: its class by status, its problem from the body (a body that is not a problem
    document, a proxy's HTML say, becomes one with the status alone)."""
    try:
        problem = Problem.model_validate(body) if isinstance(body, dict) else Problem(status=status)
    except ValueError:
        problem = Problem(status=status)
    if status == 429:
        return RateLimited(status, problem, headers, retry_after)
    if status >= 500:
        return ServerError(status, problem, headers)
    return ERRORS_BY_STATUS.get(status, ApiError)(status, problem, headers)
