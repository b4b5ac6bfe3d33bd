"""Onward's Python client: `Client(base_url, token)` and `AsyncClient(base_url, token)` submit jobs (one or a
batch), read a status with its freshness, list and count with filters, cancel, replay, manage schedules, and
`wait` for a job's final status. It imports nothing of the platform but itself (pyproject.toml's import
contracts), so a caller installs it with httpx and pydantic alone. docs/client.md is its tour and reference."""

from onward.client.asynchronous import AsyncClient
from onward.client.errors import (
    ApiError,
    Conflict,
    Forbidden,
    InvalidRequest,
    NotFound,
    OnwardClientError,
    Problem,
    RateLimited,
    ServerError,
    Unauthorized,
    Unreachable,
    WaitTimeout,
)
from onward.client.models import (
    FINAL_STATES,
    BatchEntry,
    BatchResult,
    Cancelled,
    Freshness,
    JobStatus,
    Schedule,
    StatusCounts,
    Submitted,
    ViewLag,
)
from onward.client.polling import PollPolicy
from onward.client.sync import Client
from onward.client.transport import RetryPolicy

__all__ = [
    "FINAL_STATES", "ApiError", "AsyncClient", "BatchEntry", "BatchResult", "Cancelled", "Client", "Conflict",
    "Forbidden", "Freshness", "InvalidRequest", "JobStatus", "NotFound", "OnwardClientError", "PollPolicy",
    "Problem", "RateLimited", "RetryPolicy", "Schedule", "ServerError", "StatusCounts", "Submitted",
    "Unauthorized", "Unreachable", "ViewLag", "WaitTimeout",
]
