"""The Python client of the HTTP API for callers outside the platform (Client, AsyncClient: httpx and pydantic
only, nothing else of onward): docs/client.md."""

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
    Delivery,
    Freshness,
    JobStatus,
    JobType,
    Progress,
    RateLimit,  # rate limits (issue 37)
    Schedule,
    StatusCounts,
    Submitted,
    TypeRetryPolicy,
    ViewLag,
    Webhook,
)
from onward.client.polling import PollPolicy
from onward.client.sync import Client
from onward.client.transport import RetryPolicy

__all__ = [
    "FINAL_STATES",
    "ApiError",
    "AsyncClient",
    "BatchEntry",
    "BatchResult",
    "Cancelled",
    "Client",
    "Conflict",
    "Delivery",
    "Forbidden",
    "Freshness",
    "InvalidRequest",
    "JobStatus",
    "JobType",
    "NotFound",
    "OnwardClientError",
    "PollPolicy",
    "Problem",
    "Progress",
    "RateLimit",  # rate limits (issue 37)
    "RateLimited",
    "RetryPolicy",
    "Schedule",
    "ServerError",
    "StatusCounts",
    "Submitted",
    "TypeRetryPolicy",
    "Unauthorized",
    "Unreachable",
    "ViewLag",
    "WaitTimeout",
    "Webhook",
]
