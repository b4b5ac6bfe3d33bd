"""The client's retries (onward/client/transport.py, sync.py, asynchronous.py) against a stand-in API in an
httpx.MockTransport: what is retried, with which waits, and that a submit's retries reuse one Idempotency-Key."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from onward.client import (
    AsyncClient,
    Client,
    Conflict,
    InvalidRequest,
    NotFound,
    RateLimited,
    RetryPolicy,
    ServerError,
    Unauthorized,
    Unreachable,
)
from onward.client.transport import retry_after_s
from tests.unit.client.fake_api import FakeApi, Sleeps, problem

URL = "http://127.0.0.1:9"


def _client(api: FakeApi, **options) -> Client:
    return Client(URL, "tok", transport=api.transport(), **options)


def test_a_submit_whose_answer_was_lost_is_retried_with_the_same_key_and_creates_one_job(sleeps: Sleeps):
    """The first try reaches the API (which creates the job) and its answer is lost; the second meets a 503. The
    third answers 200 with the job the first created. Without the key reused on every try, each lost answer
    would leave one more job behind."""
    api = FakeApi()
    api.faults = [api.create, problem(503, "Busy", headers={"Retry-After": "1"})]
    with _client(api) as onward:
        submitted = onward.submit("demo.echo", {"n": 1})
    keys = {request.headers["Idempotency-Key"] for request in api.requests}
    assert len(api.requests) == 3 and keys == {submitted.idempotency_key}
    assert len(api.jobs_by_key) == 1 and submitted.job_id == api.jobs_by_key[submitted.idempotency_key]
    assert submitted.created is False  # the answer of a retry: the job was the first try's
    assert sleeps.waits[1] >= 1.0  # Retry-After honoured
    assert sleeps.waits[0] <= 0.2  # full jitter from 0.2 s


def test_a_callers_key_is_sent_as_is_and_two_submits_without_one_are_two_jobs():
    api = FakeApi()
    with _client(api) as onward:
        first = onward.submit("demo.echo", idempotency_key="order-42")
        again = onward.submit("demo.echo", idempotency_key="order-42")
        other = onward.submit("demo.echo")
    assert (first.created, again.created, again.job_id) == (True, False, first.job_id)
    assert other.job_id != first.job_id and other.idempotency_key not in (None, "order-42")


def test_a_cancel_is_not_retried_after_a_lost_answer_but_is_after_a_503(sleeps: Sleeps):
    """A cancel carries no key: a second try after a lost answer could be answered 409 for the job the first try
    cancelled. A 503 (or a connection never made) is retried: nothing was done."""
    api = FakeApi(faults=[httpx.ReadError("reset")])
    with _client(api) as onward, pytest.raises(Unreachable):
        onward.cancel("a" * 32)
    assert len(api.requests) == 1
    api = FakeApi(faults=[problem(503, "Busy"), httpx.ConnectError("refused")])
    with _client(api) as onward, pytest.raises(NotFound):  # the fake has no cancel route: its 404 ends it
        onward.cancel("a" * 32)
    assert len(api.requests) == 3


def test_retries_are_bounded_in_number_and_time_and_end_in_the_typed_error(sleeps: Sleeps):
    api = FakeApi(faults=[problem(500, "Internal error")] * 10)
    with _client(api, retry=RetryPolicy(attempts=3)) as onward, pytest.raises(ServerError) as raised:
        onward.get("a" * 32)
    assert len(api.requests) == 3 and raised.value.status == 500
    api = FakeApi(faults=[problem(429, "Too many requests", headers={"Retry-After": "20"})] * 10)
    with _client(api, retry=RetryPolicy(attempts=10, budget_s=30)) as onward, pytest.raises(RateLimited) as limited:
        onward.get("a" * 32)
    assert limited.value.retry_after == 20.0
    assert len(api.requests) == 2  # a second 20 s wait would end past the 30 s budget
    api = FakeApi(faults=[httpx.ConnectError("refused")] * 10)
    with _client(api) as onward, pytest.raises(Unreachable) as unreachable:
        onward.get("a" * 32)
    assert isinstance(unreachable.value.__cause__, httpx.ConnectError) and len(api.requests) == 4


def test_full_jitter_backoff_stays_within_its_exponential_cap():
    policy = RetryPolicy(attempts=10, base_s=0.2, cap_s=5.0, budget_s=1e9, rng=random.Random(7))
    for retry in range(1, 10):
        draws = [policy.backoff_s(retry) for _ in range(200)]
        ceiling = min(5.0, 0.2 * 2 ** (retry - 1))
        assert all(0 <= draw <= ceiling for draw in draws)
        assert max(draws) > ceiling * 0.8  # spread over the whole range, not a constant
    assert policy.delay_s(attempt=10, elapsed_s=0) is None


def test_retry_after_reads_seconds_and_http_dates():
    now = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
    def answer(value: str) -> httpx.Response:
        return httpx.Response(429, headers={"Retry-After": value})
    assert retry_after_s(answer("7")) == 7.0
    assert retry_after_s(answer(format_datetime(now + timedelta(seconds=12), usegmt=True)), now) == 12.0
    assert retry_after_s(answer("soon")) is None
    assert retry_after_s(httpx.Response(429)) is None


def test_refusals_become_typed_errors_carrying_the_problem():
    api = FakeApi(faults=[
        problem(401, "Unauthorized"),
        problem(422, "Invalid request", "bad", errors=[{"loc": ["body", "type"], "msg": "required", "type": "x"}]),
        problem(409, "Already completed", job_status="succeeded"),
        httpx.Response(404, text="<html>not a problem document</html>"),
    ])
    with _client(api) as onward:
        with pytest.raises(Unauthorized):
            onward.get("a" * 32)
        with pytest.raises(InvalidRequest) as invalid:
            onward.submit("demo.echo")
        assert invalid.value.errors[0].loc == ["body", "type"] and invalid.value.problem.detail == "bad"
        with pytest.raises(Conflict) as conflict:
            onward.cancel("a" * 32)
        assert conflict.value.problem.job_status == "succeeded"
        with pytest.raises(NotFound) as missing:
            onward.get("a" * 32)
        assert missing.value.problem.status == 404


def test_the_async_client_retries_the_same_way_with_the_same_key(sleeps: Sleeps):
    """As the sync client: a lost answer, a 429, then the job the first try created, under one key."""
    api = FakeApi()
    api.faults = [api.create, problem(429, "Too many", headers={"Retry-After": "2"})]

    async def submit():
        async with AsyncClient(URL, "tok", transport=api.transport()) as onward:
            return await onward.submit("demo.echo", {"n": 1})

    submitted = asyncio.run(submit())
    assert len({request.headers["Idempotency-Key"] for request in api.requests}) == 1 and len(api.requests) == 3
    assert len(api.jobs_by_key) == 1 and submitted.created is False
    assert sleeps.waits[1] >= 2.0
