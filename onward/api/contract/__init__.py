"""The HTTP API's contract: every request and answer body as a pydantic model, by area (jobs, operators,
schedules; common: the base, problems, the API's own answers).

The routes (onward/api/routes/) take these models as their bodies' types (the resolver validates requests with
them) and build every answer from them; the resolver generates the OpenAPI document's schemas from them
(onward/api/openapi.py). So the document cannot say one thing while the code answers another, and a change of
a field is made once, here (or in onward.domain.models for the shared value objects).
"""

from __future__ import annotations

from pydantic import BaseModel

from onward.api.contract.common import Caller, Health, ProblemDetails
from onward.api.contract.job_types import JobTypesAnswer
from onward.api.contract.jobs import (
    Accepted,
    ArchivedJobStatus,
    ArchivedRuns,
    BatchCreated,
    CancelAccepted,
    JobExplanation,
    JobPage,
    JobParams,
    JobStatus,
    PendingJob,
    Runs,
    StatusCounts,
)
from onward.api.contract.operators import (
    BulkActionReport,
    BulkReplayed,
    Conflicts,
    ParkedRecords,
    PipelineLag,
    ReplayableJobs,
    Tenants,
)
from onward.api.contract.pauses import DrainState, PauseChange, Pauses
from onward.api.contract.rate_limits import RateLimitInfo, RateLimits
from onward.api.contract.schedules import ScheduleInfo, Schedules
from onward.api.contract.webhooks import Deliveries, DeliveryInfo, WebhookInfo, Webhooks
from onward.domain.models import ViewLag

# Every answer's model: the document's schemas and the tests' parsing of each answer.
ANSWERS: tuple[type[BaseModel], ...] = (Health, Accepted, CancelAccepted, JobStatus, PendingJob, JobPage, Runs,
                                         ProblemDetails, ViewLag, JobParams, StatusCounts, Caller, Tenants,
                                         PipelineLag, ParkedRecords, Conflicts, ReplayableJobs, BulkReplayed,
                                         JobExplanation, BatchCreated, BulkActionReport, ScheduleInfo,
                                         Schedules, ArchivedJobStatus, ArchivedRuns,
                                         # completion webhooks (issue 38)
                                         WebhookInfo, Webhooks, DeliveryInfo, Deliveries,
                                         # rate limits (issue 37)
                                         RateLimitInfo, RateLimits,
                                         # retry policies per job type (issue 37)
                                         JobTypesAnswer,
                                         # pause, resume and the drain switch (issue 37)
                                         PauseChange, Pauses, DrainState)
