"""Each operation of the client as a request to build (`Call`) and an answer to read, shared by Client and
AsyncClient: the routes of docs/api.md, and nothing else about HTTP."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx

from onward.client.models import (
    BatchEntry,
    BatchResult,
    Cancelled,
    Delivery,
    JobStatus,
    JobType,
    RateLimit,
    Schedule,
    StatusCounts,
    Submitted,
    Webhook,
)
from onward.client.transport import Call, new_idempotency_key

MAX_BATCH = 100  # POST /jobs/batch takes 1 to 100 jobs
MAX_PAGE = 100  # GET /jobs's and GET /schedules's largest ?limit=


def _segment(value: str) -> str:
    return quote(value, safe="")


def _wire(value: Any) -> Any:
    """A value as the API's JSON takes it: a datetime as RFC 3339 (it must carry its zone)."""
    return value.isoformat() if isinstance(value, datetime) else value


def _query(filters: Mapping[str, Any]) -> dict[str, str]:
    """Query parameters: None left out, a list or set as a comma list (as API Gateway joins repeated ones),
    booleans as true/false."""
    query: dict[str, str] = {}
    for name, value in filters.items():
        if value is None:
            continue
        if isinstance(value, list | tuple | set | frozenset):
            query[name] = ",".join(str(item) for item in (sorted(value) if isinstance(value, set | frozenset)
                                                          else value))
        elif isinstance(value, bool):
            query[name] = "true" if value else "false"
        else:
            query[name] = str(_wire(value))
    return query


def job_body(job_type: str, params: Mapping[str, Any] | None, fields: Mapping[str, Any]) -> dict[str, Any]:
    """POST /jobs's body: the type, the params, and every other field given (None left out), passed through as
    is, so a field the API documents later (`tags`) needs no client change."""
    body: dict[str, Any] = {"type": job_type}
    if params is not None:
        body["params"] = dict(params)
    body.update({name: _wire(value) for name, value in fields.items() if value is not None})
    return body


def submit(job_type: str, params: Mapping[str, Any] | None, fields: Mapping[str, Any],
           idempotency_key: str | None, traceparent: str | None = None) -> tuple[Call, str]:
    """POST /jobs with its Idempotency-Key, and the caller's W3C `traceparent` when given (the job's attempts
    continue that trace: docs/observability.md)."""
    key = idempotency_key or new_idempotency_key()
    headers = {"Idempotency-Key": key, **({"traceparent": traceparent} if traceparent else {})}
    return Call("POST", "/jobs", body=job_body(job_type, params, fields), headers=headers, idempotent=True), key


def submitted(response: httpx.Response, key: str | None = None) -> Submitted:
    return Submitted.model_validate({**response.json(), "created": response.status_code == 202,
                                     "idempotency_key": key})


def batch_entries(jobs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each job of a batch with its own idempotency_key (one is made for an entry without), `type` required."""
    entries = []
    for job in jobs:
        if "type" not in job:
            raise ValueError("each job of a batch needs a `type`")
        entry = {name: _wire(value) for name, value in job.items() if value is not None}
        entry.setdefault("idempotency_key", new_idempotency_key())
        entries.append(entry)
    return entries


def batch(entries: list[dict[str, Any]], traceparent: str | None = None) -> Call:
    """POST /jobs/batch; with the caller's W3C `traceparent`, every job of the batch continues that trace."""
    return Call("POST", "/jobs/batch", body={"jobs": entries}, idempotent=True,
                headers={"traceparent": traceparent} if traceparent else {})


def batch_result(responses: list[tuple[list[dict[str, Any]], httpx.Response]]) -> BatchResult:
    """The answers of a batch sent in chunks, as one: each entry's outcome in the order given, with its key."""
    results: list[BatchEntry] = []
    created = 0
    for entries, response in responses:
        answer = response.json()
        created += int(answer.get("created", 0))
        for entry, outcome in zip(entries, answer["results"], strict=True):
            results.append(BatchEntry.model_validate({**outcome, "idempotency_key": entry["idempotency_key"]}))
    return BatchResult(results=results, created=created)


def get(job_id: str, since: JobStatus | None) -> Call:
    headers = {"If-None-Match": since.etag} if since is not None and since.etag else {}
    return Call("GET", f"/jobs/{_segment(job_id)}", headers=headers, idempotent=True)


def status(response: httpx.Response, since: JobStatus | None) -> JobStatus:
    """A 200's status (stamped received and checked now), or, for a 304, `since` confirmed now."""
    if response.status_code == 304 and since is not None:
        return since.confirmed()
    return JobStatus.model_validate({**response.json(), "etag": response.headers.get("ETag")})


def page(path: str, filters: Mapping[str, Any], cursor: str | None) -> Call:
    return Call("GET", path, params=_query({**filters, "cursor": cursor}), idempotent=True)


def listed_jobs(response: httpx.Response) -> tuple[list[JobStatus], str | None]:
    answer = response.json()
    return [JobStatus.model_validate(job) for job in answer["jobs"]], answer.get("cursor")


def listed_schedules(response: httpx.Response) -> tuple[list[Schedule], str | None]:
    answer = response.json()
    return [Schedule.model_validate(item) for item in answer["schedules"]], answer.get("cursor")


def count(filters: Mapping[str, Any]) -> Call:
    return Call("GET", "/jobs/counts", params=_query(filters), idempotent=True)


def counts(response: httpx.Response) -> StatusCounts:
    return StatusCounts.model_validate(response.json())


def cancel(job_id: str) -> Call:
    return Call("POST", f"/jobs/{_segment(job_id)}/cancel")


def cancelled(response: httpx.Response) -> Cancelled:
    return Cancelled.model_validate(response.json())


def replay(job_id: str) -> Call:
    return Call("POST", f"/jobs/{_segment(job_id)}/replay")


def create_schedule(body: dict[str, Any], tenant: str | None) -> Call:
    return Call("POST", "/schedules", params=_query({"tenant": tenant}), body=body)


def schedule(response: httpx.Response) -> Schedule:
    return Schedule.model_validate(response.json())


def delete_schedule(name: str, tenant: str | None) -> Call:
    return Call("DELETE", f"/schedules/{_segment(name)}", params=_query({"tenant": tenant}))


# --- webhooks ---------------------------------------------------------------------------------------------------


def _tenant(tenant: str | None) -> dict[str, str]:
    return _query({"tenant": tenant})


def create_webhook(url: str, events: Iterable[str], secret: str, tenant: str | None) -> Call:
    # not retried after a lost answer: a second POST would register a second endpoint
    return Call("POST", "/webhooks", params=_tenant(tenant), body={"url": url, "events": list(events),
                                                                    "secret": secret})


def webhook(response: httpx.Response) -> Webhook:
    return Webhook.model_validate(response.json())


def list_webhooks(tenant: str | None) -> Call:
    return Call("GET", "/webhooks", params=_tenant(tenant), idempotent=True)


def webhooks(response: httpx.Response) -> list[Webhook]:
    return [Webhook.model_validate(item) for item in response.json()["webhooks"]]


def delete_webhook(webhook_id: str, tenant: str | None) -> Call:
    return Call("DELETE", f"/webhooks/{_segment(webhook_id)}", params=_tenant(tenant), idempotent=True)


def list_deliveries(webhook_id: str, tenant: str | None) -> Call:
    return Call("GET", f"/webhooks/{_segment(webhook_id)}/deliveries", params=_tenant(tenant), idempotent=True)


def deliveries(response: httpx.Response) -> list[Delivery]:
    return [Delivery.model_validate(item) for item in response.json()["deliveries"]]


def redeliver(webhook_id: str, delivery_id: str, tenant: str | None) -> Call:
    return Call("POST", f"/webhooks/{_segment(webhook_id)}/deliveries/{_segment(delivery_id)}/redeliver",
                params=_tenant(tenant))


def delivery(response: httpx.Response) -> Delivery:
    return Delivery.model_validate(response.json())


# --- rate limits (issue 37) ---------------------------------------------------------------------------------------


def put_rate_limit(key: str, limit: int, period_s: float, tenant: str | None) -> Call:
    return Call("PUT", f"/rate-limits/{_segment(key)}", params=_tenant(tenant),
                body={"limit": limit, "period_s": period_s}, idempotent=True)


def get_rate_limit(key: str, tenant: str | None) -> Call:
    return Call("GET", f"/rate-limits/{_segment(key)}", params=_tenant(tenant), idempotent=True)


def list_rate_limits(tenant: str | None) -> Call:
    return Call("GET", "/rate-limits", params=_tenant(tenant), idempotent=True)


def delete_rate_limit(key: str, tenant: str | None) -> Call:
    return Call("DELETE", f"/rate-limits/{_segment(key)}", params=_tenant(tenant), idempotent=True)


def rate_limit(response: httpx.Response) -> RateLimit:
    return RateLimit.model_validate(response.json())


def rate_limits(response: httpx.Response) -> list[RateLimit]:
    return [RateLimit.model_validate(item) for item in response.json()["rate_limits"]]
def list_job_types() -> Call:  # retry policies per job type (issue 37)
    return Call("GET", "/job-types", idempotent=True)


def job_types(response: httpx.Response) -> list[JobType]:
    return [JobType.model_validate(item) for item in response.json()["types"]]
