"""What the client sends and reads (onward/client/calls.py, polling.py) against a stand-in API in an
httpx.MockTransport: pass-through fields, batches, conditional reads, `wait`'s polling, cursors."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from onward.client import FINAL_STATES, AsyncClient, Client, PollPolicy, WaitTimeout
from onward.domain.states import TERMINAL_STATES
from tests.unit.client.fake_api import FakeApi, Sleeps, status_body

URL = "http://127.0.0.1:9"
JOB = "a" * 32


def test_the_clients_final_states_are_the_platforms_terminal_states():
    """The client imports nothing of the platform, so it keeps its own list: it must be the platform's."""
    assert {str(state) for state in TERMINAL_STATES} == FINAL_STATES


def test_submit_passes_every_field_through_and_writes_times_with_their_zone():
    """`tags` (a field the client does not know) goes into the body as given: a field the API adds later needs
    no client change. None is left out, so the API's defaults apply."""
    api = FakeApi()
    run_at = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
    with Client(URL, "tok", transport=api.transport()) as onward:
        onward.submit("demo.echo", {"n": 1}, priority=5, run_at=run_at, tags={"customer": "c-1"})
    sent = api.requests[0]
    assert json.loads(sent.content) == {"type": "demo.echo", "params": {"n": 1}, "priority": 5,
                                        "run_at": "2026-12-05T10:00:00+00:00", "tags": {"customer": "c-1"}}
    assert sent.headers["Authorization"] == "Bearer tok" and sent.headers["Content-Type"] == "application/json"


def test_submit_many_sends_100_a_request_each_entry_with_its_own_key_and_keeps_the_order():
    api = FakeApi()
    jobs = [{"type": "demo.echo", "params": {"i": i}} for i in range(250)]
    jobs[3]["idempotency_key"] = "mine-3"
    with Client(URL, "tok", transport=api.transport()) as onward:
        result = onward.submit_many(jobs)
    sizes = [len(json.loads(request.content)["jobs"]) for request in api.requests]
    assert sizes == [100, 100, 50] and result.created == 250 and len(result.results) == 250
    keys = [entry.idempotency_key for entry in result.results]
    assert keys[3] == "mine-3" and len(set(keys)) == 250
    sent = [entry for request in api.requests for entry in json.loads(request.content)["jobs"]]
    assert [entry["params"]["i"] for entry in sent] == list(range(250))


def test_submit_many_sends_the_callers_traceparent_with_every_chunk():
    """Catches a batch whose trace context is dropped by the client (or sent with the first chunk only): the
    jobs of the later requests would start traces of their own."""
    api = FakeApi()
    header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    with Client(URL, "tok", transport=api.transport()) as onward:
        onward.submit_many([{"type": "demo.echo"}] * 150, traceparent=header)
        onward.submit_many([{"type": "demo.echo"}])
    assert [request.headers.get("traceparent") for request in api.requests] == [header, header, None]


def test_a_status_ignores_fields_it_does_not_know_and_a_304_confirms_the_earlier_one():
    """`progress` and `trace_id` (added by other features) are ignored, not refused. A read with `since` sends
    its ETag; the 304 answers `since` itself, checked now but received when its 200 was: its freshness is the
    API's of that moment, aged by age_s_now()."""
    api = FakeApi(script=["running"])
    with Client(URL, "tok", transport=api.transport()) as onward:
        first = onward.get(JOB)
        again = onward.get(JOB, since=first)
    assert first.status == "running" and first.etag == 'W/"v2"' and first.freshness.view_lag_s == 0.8
    assert api.requests[1].headers["If-None-Match"] == 'W/"v2"' and api.answers == [200, 304]
    assert again.version == first.version and again.received_at == first.received_at
    assert again.checked_at >= first.checked_at
    later = first.received_at + timedelta(seconds=10)
    assert first.age_s_now(later) == pytest.approx(11.5)


def test_wait_polls_with_growing_delays_and_conditional_reads_until_final(sleeps: Sleeps):
    """Pending, queued, running (several polls unchanged), then succeeded: each repeat read is conditional
    (304 while unchanged) and the delays grow from ~0.2 s by 1.5x to the 5 s cap. A fixed short delay would
    hammer the API for a long job; without the ETag each poll would carry the whole status."""
    api = FakeApi(script=[None, "queued", "running", *["running"] * 12, "succeeded"])
    with Client(URL, "tok", transport=api.transport()) as onward:
        final = onward.wait(JOB, timeout_s=300)
    assert final.status == "succeeded" and final.final
    assert api.answers.count(304) >= 10
    conditional = [request.headers.get("If-None-Match") for request in api.requests[1:]]
    assert all(conditional)
    assert 0.18 <= sleeps.waits[0] <= 0.22
    assert all(later >= earlier * 1.2 for earlier, later in zip(sleeps.waits, sleeps.waits[1:8], strict=False))
    assert max(sleeps.waits) <= 5.0 * 1.1


def test_wait_times_out_with_the_last_status_and_its_freshness(sleeps: Sleeps):
    api = FakeApi(script=["running"])
    with Client(URL, "tok", transport=api.transport()) as onward, pytest.raises(WaitTimeout) as timed_out:
        onward.wait(JOB, timeout_s=20)
    assert timed_out.value.last.status == "running" and timed_out.value.freshness.view_lag_s == 0.8
    assert sum(sleeps.waits) == pytest.approx(20)  # the last sleep is trimmed to the deadline
    assert len(api.requests) == len(sleeps.waits) + 1  # one read after the last sleep, at the deadline


def test_wait_reads_unconditionally_once_its_last_body_is_older_than_refresh_s(sleeps: Sleeps,
                                                                               monkeypatch: pytest.MonkeyPatch):
    """A 304 does not measure the view's lag again: a wait that only got 304s for minutes would hold a lag bound
    from its first read. Once the last 200 is `refresh_s` old, the next read is a full one."""
    from onward.client import models, polling

    start = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)

    class Clock(datetime):
        @classmethod
        def now(cls, tz=None):
            return start + timedelta(seconds=sleeps.clock - 1000.0)

    monkeypatch.setattr(models, "datetime", Clock)
    monkeypatch.setattr(polling, "datetime", Clock)
    api = FakeApi(script=["running"])
    poll = PollPolicy(refresh_s=12)
    with Client(URL, "tok", transport=api.transport(), poll=poll) as onward, pytest.raises(WaitTimeout):
        onward.wait(JOB, timeout_s=60)
    assert api.answers.count(200) >= 4 and api.answers.count(304) >= 4


def test_list_follows_cursors_only_as_far_as_it_is_iterated():
    pages = {None: ([status_body("1" * 32, "dead"), status_body("2" * 32, "dead")], "c1"),
             "c1": ([status_body("3" * 32, "quarantined")], None)}
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        jobs, cursor = pages[request.url.params.get("cursor")]
        return httpx.Response(200, json={"jobs": jobs, "cursor": cursor, "view": {}})

    with Client(URL, "tok", transport=httpx.MockTransport(handle)) as onward:
        listing = onward.list(status=["dead", "quarantined"], tag="customer:c-1")
        assert next(listing).job_id == "1" * 32 and len(seen) == 1  # lazy: one page read
        assert [job.job_id for job in listing] == ["2" * 32, "3" * 32]
    assert seen[0].url.params["status"] == "dead,quarantined" and seen[0].url.params["tag"] == "customer:c-1"
    assert seen[1].url.params["cursor"] == "c1" and seen[0].url.params["limit"] == "100"

    async def async_listing() -> list[str]:
        async with AsyncClient(URL, "tok", transport=httpx.MockTransport(handle)) as onward:
            return [job.job_id async for job in onward.list(status="dead")]

    assert asyncio.run(async_listing()) == ["1" * 32, "2" * 32, "3" * 32]


def test_the_async_wait_polls_as_the_sync_one(sleeps: Sleeps):
    api = FakeApi(script=[None, "running", "running", "running", "dead"])

    async def wait():
        async with AsyncClient(URL, "tok", transport=api.transport()) as onward:
            return await onward.wait(JOB, timeout_s=60)

    assert asyncio.run(wait()).status == "dead"
    assert api.answers == [200, 200, 304, 304, 200] and len(sleeps.waits) == 4
