"""`Client`: Onward's HTTP API from Python, on one kept-alive connection pool (httpx), with bounded retries that
reuse a submit's Idempotency-Key (onward.client.transport) and a `wait` that polls with backoff and conditional
reads (onward.client.polling). docs/client.md is its tour and reference."""

from __future__ import annotations

import builtins
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, Self

import httpx

from onward.client import calls, pause_calls
from onward.client.errors import Unreachable, WaitTimeout
from onward.client.models import (
    BatchResult,
    Cancelled,
    Delivery,
    DrainState,
    JobStatus,
    JobType,
    PauseChange,
    Pauses,
    RateLimit,
    Schedule,
    StatusCounts,
    Submitted,
    Webhook,
)
from onward.client.polling import PollPolicy, Waiting
from onward.client.transport import (
    DEFAULT_TIMEOUT_S,
    Call,
    RetryPolicy,
    checked,
    retry_delay_after_answer,
    retry_delay_after_error,
    session_headers,
)


class Client:
    """`Client(base_url, token)`: a tenant's (or an operator's) calls to one Onward API. Use it as a context
    manager, or call `close()`: it keeps its connections open between calls."""

    def __init__(self, base_url: str, token: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 retry: RetryPolicy | None = None, poll: PollPolicy | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.retry = retry or RetryPolicy()
        self.poll = poll or PollPolicy()
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=session_headers(token),
                                  timeout=timeout_s, transport=transport)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: Call) -> httpx.Response:
        """The call's answer once final (tries again as onward.client.transport says); a refusal raises its
        typed exception, no answer at all Unreachable."""
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.send(call.request(self._http))
            except httpx.TransportError as error:
                delay = retry_delay_after_error(self.retry, call, error, attempt, time.monotonic() - started)
                if delay is None:
                    raise Unreachable(f"{call.method} {call.path}: {type(error).__name__} after {attempt} "
                                      f"attempt(s)") from error
            else:
                delay = retry_delay_after_answer(self.retry, call, response, attempt, time.monotonic() - started)
                if delay is None:
                    return checked(response)
            time.sleep(delay)

    # --- jobs ------------------------------------------------------------------------------------------------

    def submit(self, type: str, params: Mapping[str, Any] | None = None, *, max_attempts: int | None = None,
               priority: int | None = None, run_at: datetime | str | None = None, delay_s: float | None = None,
               timeout_s: float | None = None, idempotency_key: str | None = None, traceparent: str | None = None,
               **fields: Any) -> Submitted:
        """Create a job (POST /jobs). Every retry sends the same Idempotency-Key (`idempotency_key`, or one made
        for this call), so however many tries it takes, one job is created. `fields` are passed through as body
        fields (`tags={"k": "v"}`, `unique={"key": "k", "window_s": 60}`, `concurrency={"key": "k", "limit": 1}`...).
        `created` is False when an earlier request with the key created it, or the job holding the unique key was
        answered (`duplicate_of_unique`)."""
        call, key = calls.submit(type, params, {"max_attempts": max_attempts, "priority": priority,
                                                "run_at": run_at, "delay_s": delay_s, "timeout_s": timeout_s,
                                                **fields}, idempotency_key, traceparent)
        return calls.submitted(self._send(call), key)

    def submit_many(self, jobs: Iterable[Mapping[str, Any]], *, traceparent: str | None = None) -> BatchResult:
        """Create jobs (POST /jobs/batch, 100 a request): each a POST /jobs body, with its own idempotency_key
        (one is made for an entry without). A refused entry refuses only itself: see each result's `status`. With
        `traceparent`, every job continues the caller's trace (docs/observability.md)."""
        entries = calls.batch_entries(jobs)
        chunks = [entries[at:at + calls.MAX_BATCH] for at in range(0, len(entries), calls.MAX_BATCH)]
        return calls.batch_result([(chunk, self._send(calls.batch(chunk, traceparent))) for chunk in chunks])

    def get(self, job_id: str, *, since: JobStatus | None = None) -> JobStatus:
        """The job's status with its freshness (GET /jobs/{job_id}). With `since` (an earlier status of this job),
        a conditional read: while nothing newer was projected, `since` comes back with `checked_at` now."""
        return calls.status(self._send(calls.get(job_id, since)), since)

    def wait(self, job_id: str, timeout_s: float, *, poll: PollPolicy | None = None) -> JobStatus:
        """The job's final status (`.final`: succeeded, dead, cancelled or quarantined), polling with backoff and
        conditional reads; WaitTimeout (with the last status and its freshness) after `timeout_s`."""
        waiting = Waiting(poll or self.poll, timeout_s)
        while True:
            waiting.last = self.get(job_id, since=waiting.since())
            if waiting.last.final:
                return waiting.last
            delay = waiting.next_delay_s()
            if delay is None:
                raise WaitTimeout(job_id, timeout_s, waiting.last)
            time.sleep(delay)

    def list(self, *, page_size: int = calls.MAX_PAGE, **filters: Any) -> Iterator[JobStatus]:
        """The tenant's jobs, most recently changed first (GET /jobs), following the cursors as it is iterated:
        `status=["dead", "quarantined"]`, `type=`, `id_prefix=`, `tenant=` (operators), and any filter the API
        documents (`tag="k:v"`). A page is read only when the iteration reaches it."""
        cursor: str | None = None
        while True:
            jobs, cursor = calls.listed_jobs(self._send(calls.page("/jobs", {**filters, "limit": page_size},
                                                                   cursor)))
            yield from jobs
            if cursor is None:
                return

    def count(self, **filters: Any) -> StatusCounts:
        """The tenant's jobs per status (GET /jobs/counts): `type=`, `tenant=` (operators), any documented filter."""
        return calls.counts(self._send(calls.count(filters)))

    def cancel(self, job_id: str) -> Cancelled:
        """Cancel the job (`cancelled` at once, or `cancel_requested` for a running one); Conflict if it ended."""
        return calls.cancelled(self._send(calls.cancel(job_id)))

    def replay(self, job_id: str) -> Submitted:
        """Queue a dead or quarantined job again (operators); Conflict for any other status."""
        return calls.submitted(self._send(calls.replay(job_id)))

    # --- schedules -------------------------------------------------------------------------------------------

    def create_schedule(self, name: str, type: str, params: Mapping[str, Any] | None = None, *,
                        cron: str | None = None, rate: str | None = None, timezone: str | None = None,
                        tenant: str | None = None, **fields: Any) -> Schedule:
        """A periodic job (POST /schedules): `cron` or `rate`, `timezone`, and any other field of the API's body
        (`max_attempts`, `priority`); `tenant=` for an operator bound to no tenant."""
        body = {"name": name, **calls.job_body(type, params, {"cron": cron, "rate": rate, "timezone": timezone,
                                                              **fields})}
        return calls.schedule(self._send(calls.create_schedule(body, tenant)))

    def schedules(self, *, tenant: str | None = None, page_size: int = calls.MAX_PAGE) -> Iterator[Schedule]:
        """The tenant's schedules by name (GET /schedules), following the cursors as it is iterated."""
        cursor: str | None = None
        while True:
            found, cursor = calls.listed_schedules(self._send(calls.page(
                "/schedules", {"tenant": tenant, "limit": page_size}, cursor)))
            yield from found
            if cursor is None:
                return

    def delete_schedule(self, name: str, *, tenant: str | None = None) -> None:
        """Delete a schedule (DELETE /schedules/{name}); NotFound when there is none."""
        self._send(calls.delete_schedule(name, tenant))

    # --- webhooks --------------------------------------------------------------------------------------------

    def create_webhook(self, url: str, events: Iterable[str], secret: str, *, tenant: str | None = None) -> Webhook:
        """Register an endpoint (POST /webhooks): each matching event is POSTed to `url`, signed with `secret`
        (docs/webhooks.md); `events` are statuses, "failed", "final" or "*"."""
        return calls.webhook(self._send(calls.create_webhook(url, events, secret, tenant)))

    def webhooks(self, *, tenant: str | None = None) -> builtins.list[Webhook]:
        """The tenant's endpoints, oldest first (GET /webhooks)."""
        return calls.webhooks(self._send(calls.list_webhooks(tenant)))

    def delete_webhook(self, webhook_id: str, *, tenant: str | None = None) -> None:
        """Stop sending to an endpoint (DELETE /webhooks/{id}); NotFound when there is none."""
        self._send(calls.delete_webhook(webhook_id, tenant))

    def deliveries(self, webhook_id: str, *, tenant: str | None = None) -> builtins.list[Delivery]:
        """The endpoint's recent deliveries, newest first, failed ones with their last error."""
        return calls.deliveries(self._send(calls.list_deliveries(webhook_id, tenant)))

    def redeliver(self, webhook_id: str, delivery_id: str, *, tenant: str | None = None) -> Delivery:
        """Send a delivery again (a failed one, typically): pending again, with a fresh retry time."""
        return calls.delivery(self._send(calls.redeliver(webhook_id, delivery_id, tenant)))

    # --- rate limits (issue 37; docs/flow-control.md) ----------------------------------------------------------

    def set_rate_limit(self, key: str, limit: int, period_s: float, *, tenant: str | None = None) -> RateLimit:
        """At most `limit` starts per `period_s` on `key` (PUT /rate-limits/{key}): `tenant`, `type:<job type>`, or
        the `rate_limit_key` jobs name."""
        return calls.rate_limit(self._send(calls.put_rate_limit(key, limit, period_s, tenant)))

    def rate_limit(self, key: str, *, tenant: str | None = None) -> RateLimit:
        """One limit (GET /rate-limits/{key}); NotFound when there is none."""
        return calls.rate_limit(self._send(calls.get_rate_limit(key, tenant)))

    def rate_limits(self, *, tenant: str | None = None) -> builtins.list[RateLimit]:
        """The tenant's limits by key (GET /rate-limits)."""
        return calls.rate_limits(self._send(calls.list_rate_limits(tenant)))

    def delete_rate_limit(self, key: str, *, tenant: str | None = None) -> None:
        """Remove a limit (DELETE /rate-limits/{key}); NotFound when there is none."""
        self._send(calls.delete_rate_limit(key, tenant))
    def job_types(self) -> builtins.list[JobType]:
        """The job types workers declared, by name, each with its retry policy (GET /job-types)."""
        return calls.job_types(self._send(calls.list_job_types()))
    # --- pause, resume and the drain switch (issue 37; docs/flow-control.md) ----------------------------------

    def pause(self, *, type: str | None = None) -> PauseChange:
        """Pause the tenant's own jobs of `type`, or all of them (POST /pause): none starts, running ones finish."""
        return pause_calls.change(self._send(pause_calls.pause(type)))

    def resume(self, *, type: str | None = None) -> PauseChange:
        """Lift the tenant's pause, named as it was paused (POST /resume)."""
        return pause_calls.change(self._send(pause_calls.resume(type)))

    def pauses(self) -> Pauses:
        """What holds the tenant's jobs (GET /pauses): its pauses, types paused for everyone, the drain switch."""
        return pause_calls.pauses(self._send(pause_calls.list_pauses()))

    def ops_pause(self, *, tenant: str | None = None, type: str | None = None) -> PauseChange:
        """An operator's pause (POST /ops/pause): a tenant, a type of every tenant, or one tenant's type."""
        return pause_calls.change(self._send(pause_calls.ops_pause(tenant, type)))

    def ops_resume(self, *, tenant: str | None = None, type: str | None = None) -> PauseChange:
        """Lift an operator's pause, named as it was paused (POST /ops/resume)."""
        return pause_calls.change(self._send(pause_calls.ops_resume(tenant, type)))

    def ops_pauses(self) -> Pauses:
        """Every pause in force and the drain switch (GET /ops/pauses)."""
        return pause_calls.pauses(self._send(pause_calls.ops_list_pauses()))

    def drain(self, on: bool = True) -> DrainState:
        """Turn the platform's drain switch on or off (POST /ops/drain; an operator bound to no tenant)."""
        return pause_calls.drain_state(self._send(pause_calls.drain(on)))


__all__ = ["Client"]
