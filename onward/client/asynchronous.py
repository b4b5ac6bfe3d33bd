"""`AsyncClient`: the same calls as onward.client.sync.Client for asyncio (httpx.AsyncClient, one kept-alive
connection pool), with the same retries, conditional reads and polling: only the I/O differs."""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import AsyncIterator, Iterable, Mapping
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


class AsyncClient:
    """`AsyncClient(base_url, token)`: `async with AsyncClient(...) as onward: await onward.submit(...)`. Each
    method is Client's, awaited; `list` and `schedules` are async iterators."""

    def __init__(self, base_url: str, token: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 retry: RetryPolicy | None = None, poll: PollPolicy | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.retry = retry or RetryPolicy()
        self.poll = poll or PollPolicy()
        self._http = httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=session_headers(token),
                                       timeout=timeout_s, transport=transport)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call) -> httpx.Response:
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.send(call.request(self._http))
            except httpx.TransportError as error:
                delay = retry_delay_after_error(self.retry, call, error, attempt, time.monotonic() - started)
                if delay is None:
                    raise Unreachable(f"{call.method} {call.path}: {type(error).__name__} after {attempt} "
                                      f"attempt(s)") from error
            else:
                delay = retry_delay_after_answer(self.retry, call, response, attempt, time.monotonic() - started)
                if delay is None:
                    return checked(response)
            await asyncio.sleep(delay)

    # --- jobs ------------------------------------------------------------------------------------------------

    async def submit(self, type: str, params: Mapping[str, Any] | None = None, *, max_attempts: int | None = None,
                     priority: int | None = None, run_at: datetime | str | None = None,
                     delay_s: float | None = None, timeout_s: float | None = None,
                     idempotency_key: str | None = None, traceparent: str | None = None,
                     **fields: Any) -> Submitted:
        """As Client.submit: one Idempotency-Key for every try."""
        call, key = calls.submit(type, params, {"max_attempts": max_attempts, "priority": priority,
                                                "run_at": run_at, "delay_s": delay_s, "timeout_s": timeout_s,
                                                **fields}, idempotency_key, traceparent)
        return calls.submitted(await self._send(call), key)

    async def submit_many(self, jobs: Iterable[Mapping[str, Any]], *, traceparent: str | None = None) -> BatchResult:
        entries = calls.batch_entries(jobs)
        chunks = [entries[at:at + calls.MAX_BATCH] for at in range(0, len(entries), calls.MAX_BATCH)]
        return calls.batch_result([(chunk, await self._send(calls.batch(chunk, traceparent))) for chunk in chunks])

    async def get(self, job_id: str, *, since: JobStatus | None = None) -> JobStatus:
        return calls.status(await self._send(calls.get(job_id, since)), since)

    async def wait(self, job_id: str, timeout_s: float, *, poll: PollPolicy | None = None) -> JobStatus:
        """As Client.wait; other tasks run while it sleeps."""
        waiting = Waiting(poll or self.poll, timeout_s)
        while True:
            waiting.last = await self.get(job_id, since=waiting.since())
            if waiting.last.final:
                return waiting.last
            delay = waiting.next_delay_s()
            if delay is None:
                raise WaitTimeout(job_id, timeout_s, waiting.last)
            await asyncio.sleep(delay)

    async def list(self, *, page_size: int = calls.MAX_PAGE, **filters: Any) -> AsyncIterator[JobStatus]:
        """As Client.list: `async for job in onward.list(status="dead")`."""
        cursor: str | None = None
        while True:
            jobs, cursor = calls.listed_jobs(await self._send(calls.page("/jobs", {**filters, "limit": page_size},
                                                                         cursor)))
            for job in jobs:
                yield job
            if cursor is None:
                return

    async def count(self, **filters: Any) -> StatusCounts:
        return calls.counts(await self._send(calls.count(filters)))

    async def cancel(self, job_id: str) -> Cancelled:
        return calls.cancelled(await self._send(calls.cancel(job_id)))

    async def replay(self, job_id: str) -> Submitted:
        return calls.submitted(await self._send(calls.replay(job_id)))

    # --- schedules -------------------------------------------------------------------------------------------

    async def create_schedule(self, name: str, type: str, params: Mapping[str, Any] | None = None, *,
                              cron: str | None = None, rate: str | None = None, timezone: str | None = None,
                              tenant: str | None = None, **fields: Any) -> Schedule:
        body = {"name": name, **calls.job_body(type, params, {"cron": cron, "rate": rate, "timezone": timezone,
                                                              **fields})}
        return calls.schedule(await self._send(calls.create_schedule(body, tenant)))

    async def schedules(self, *, tenant: str | None = None,
                        page_size: int = calls.MAX_PAGE) -> AsyncIterator[Schedule]:
        cursor: str | None = None
        while True:
            found, cursor = calls.listed_schedules(await self._send(calls.page(
                "/schedules", {"tenant": tenant, "limit": page_size}, cursor)))
            for schedule in found:
                yield schedule
            if cursor is None:
                return

    async def delete_schedule(self, name: str, *, tenant: str | None = None) -> None:
        await self._send(calls.delete_schedule(name, tenant))

    # --- webhooks --------------------------------------------------------------------------------------------

    async def create_webhook(self, url: str, events: Iterable[str], secret: str, *,
                             tenant: str | None = None) -> Webhook:
        return calls.webhook(await self._send(calls.create_webhook(url, events, secret, tenant)))

    async def webhooks(self, *, tenant: str | None = None) -> builtins.list[Webhook]:
        return calls.webhooks(await self._send(calls.list_webhooks(tenant)))

    async def delete_webhook(self, webhook_id: str, *, tenant: str | None = None) -> None:
        await self._send(calls.delete_webhook(webhook_id, tenant))

    async def deliveries(self, webhook_id: str, *, tenant: str | None = None) -> builtins.list[Delivery]:
        return calls.deliveries(await self._send(calls.list_deliveries(webhook_id, tenant)))

    async def redeliver(self, webhook_id: str, delivery_id: str, *, tenant: str | None = None) -> Delivery:
        return calls.delivery(await self._send(calls.redeliver(webhook_id, delivery_id, tenant)))

    # --- rate limits (issue 37; docs/flow-control.md) ----------------------------------------------------------

    async def set_rate_limit(self, key: str, limit: int, period_s: float, *, tenant: str | None = None) -> RateLimit:
        """At most `limit` starts per `period_s` on `key` (PUT /rate-limits/{key}): `tenant`, `type:<job type>`, or
        the `rate_limit_key` jobs name."""
        return calls.rate_limit(await self._send(calls.put_rate_limit(key, limit, period_s, tenant)))

    async def rate_limit(self, key: str, *, tenant: str | None = None) -> RateLimit:
        """One limit (GET /rate-limits/{key}); NotFound when there is none."""
        return calls.rate_limit(await self._send(calls.get_rate_limit(key, tenant)))

    async def rate_limits(self, *, tenant: str | None = None) -> builtins.list[RateLimit]:
        """The tenant's limits by key (GET /rate-limits)."""
        return calls.rate_limits(await self._send(calls.list_rate_limits(tenant)))

    async def delete_rate_limit(self, key: str, *, tenant: str | None = None) -> None:
        """Remove a limit (DELETE /rate-limits/{key}); NotFound when there is none."""
        await self._send(calls.delete_rate_limit(key, tenant))
    async def job_types(self) -> builtins.list[JobType]:
        return calls.job_types(await self._send(calls.list_job_types()))
    # --- pause, resume and the drain switch (issue 37; docs/flow-control.md): as Client's -------------------

    async def pause(self, *, type: str | None = None) -> PauseChange:
        return pause_calls.change(await self._send(pause_calls.pause(type)))

    async def resume(self, *, type: str | None = None) -> PauseChange:
        return pause_calls.change(await self._send(pause_calls.resume(type)))

    async def pauses(self) -> Pauses:
        return pause_calls.pauses(await self._send(pause_calls.list_pauses()))

    async def ops_pause(self, *, tenant: str | None = None, type: str | None = None) -> PauseChange:
        return pause_calls.change(await self._send(pause_calls.ops_pause(tenant, type)))

    async def ops_resume(self, *, tenant: str | None = None, type: str | None = None) -> PauseChange:
        return pause_calls.change(await self._send(pause_calls.ops_resume(tenant, type)))

    async def ops_pauses(self) -> Pauses:
        return pause_calls.pauses(await self._send(pause_calls.ops_list_pauses()))

    async def drain(self, on: bool = True) -> DrainState:
        return pause_calls.drain_state(await self._send(pause_calls.drain(on)))


__all__ = ["AsyncClient"]
