"""onward.client against the whole platform as `onward up` runs it (tests/integration/client/conftest.py): the
sync and async clients submit, wait, read conditionally, list, count, cancel, replay and manage schedules over
real HTTP, and a submit whose answer is lost is retried into the one job it created."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from onward.client import AsyncClient, Client, Conflict, Forbidden, NotFound, PollPolicy, RetryPolicy, WaitTimeout
from tests.integration.client.conftest import OPERATOR, TOKENS, AsyncCountingTransport, CountingTransport, Seen

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # the platform's pollers read and write streams

WAIT_S = 60


def test_submit_wait_get_list_count_with_conditional_polls(platform):
    """The sync client's tour: submit, wait for the final status, read it again conditionally (304), find it in
    the listing and the counts. `wait` polls conditionally: some of its reads are 304s, and every read after its
    first carries the last ETag. Without the ETag every poll would carry the whole status."""
    seen = Seen()
    with Client(platform.url, TOKENS["acme"], transport=CountingTransport(seen)) as onward:
        submitted = onward.submit("demo.sleep", {"seconds": 1.5})
        assert submitted.created and submitted.status == "queued"
        final = onward.wait(submitted.job_id, timeout_s=WAIT_S)
        assert (final.status, final.final, final.result.inline) == ("succeeded", True, {"slept_s": 1.5})
        assert final.freshness is not None and final.freshness.as_of >= final.updated_at
        polls = seen.statuses("GET", f"/jobs/{submitted.job_id}")
        assert 304 in polls and polls[-1] == 200, polls
        assert all(seen.conditional[1:len(polls)]), "every poll after the first is conditional"

        again = onward.get(submitted.job_id, since=final)
        assert seen.answers[-1][2] == 304 and again.version == final.version and again.checked_at > final.checked_at

        listed = list(onward.list(type="demo.sleep", page_size=1))
        assert submitted.job_id in {job.job_id for job in listed}
        counts = onward.count(type="demo.sleep")
        assert counts.counts["succeeded"] >= 1 and counts.complete
        with pytest.raises(NotFound):
            onward.get("0" * 32)
        with pytest.raises(Conflict) as ended:
            onward.cancel(submitted.job_id)
        assert ended.value.problem.job_status == "succeeded"


def test_a_submit_whose_answer_is_lost_creates_one_job_on_the_platform(platform):
    """The first POST reaches the API, which creates the job, and its answer is dropped on the way back (a
    connection reset). The client tries again with the same Idempotency-Key and gets the first job (200). The
    job table holds one job more than before, not two."""
    dropped: list[int] = []

    class LosesFirstAnswer(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            response = super().handle_request(request)
            if request.method == "POST" and not dropped:
                response.read()
                dropped.append(response.status_code)
                raise httpx.ReadError("connection reset by peer", request=request)
            return response

    before = sum(1 for _ in platform.store.all_jobs())
    with Client(platform.url, TOKENS["acme"], transport=LosesFirstAnswer()) as onward:
        submitted = onward.submit("demo.echo", {"once": True})
        assert dropped == [202] and submitted.created is False
        assert onward.wait(submitted.job_id, timeout_s=WAIT_S).status == "succeeded"
    assert sum(1 for _ in platform.store.all_jobs()) == before + 1


def test_cancel_and_replay_and_a_wait_that_times_out(platform):
    with Client(platform.url, TOKENS["acme"]) as acme, Client(platform.url, OPERATOR) as operator:
        sleeping = acme.submit("demo.sleep", {"seconds": 30})
        with pytest.raises(WaitTimeout) as timed_out:
            acme.wait(sleeping.job_id, timeout_s=1.0, poll=PollPolicy(start_s=0.2))
        assert timed_out.value.last is not None and timed_out.value.last.job_id == sleeping.job_id
        assert acme.cancel(sleeping.job_id).status in ("cancelled", "cancel_requested")
        assert acme.wait(sleeping.job_id, timeout_s=WAIT_S).status == "cancelled"

        failing = acme.submit("demo.fail", {"permanent": True}, max_attempts=1)
        assert acme.wait(failing.job_id, timeout_s=WAIT_S).status == "dead"
        with pytest.raises(Forbidden):
            acme.replay(failing.job_id)
        replayed = operator.replay(failing.job_id)
        assert replayed.status == "queued" and replayed.version > 1
        assert acme.wait(failing.job_id, timeout_s=WAIT_S).status == "dead"  # it fails again, as it should


def test_schedules_are_created_listed_and_deleted(platform):
    with Client(platform.url, TOKENS["acme"], retry=RetryPolicy(attempts=2)) as onward:
        created = onward.create_schedule("nightly-report", "demo.echo", {"n": 1}, cron="0 3 * * *",
                                         timezone="Europe/Paris")
        assert created.name == "nightly-report" and created.next_fire_at
        assert [schedule.name for schedule in onward.schedules()] == ["nightly-report"]
        with pytest.raises(Conflict):
            onward.create_schedule("nightly-report", "demo.echo", rate="1 hour")
        onward.delete_schedule("nightly-report")
        assert list(onward.schedules()) == []
        with pytest.raises(NotFound):
            onward.delete_schedule("nightly-report")


def test_the_async_client_submits_a_batch_waits_lists_and_counts(platform):
    """The asyncio client on the same platform: a batch, a wait per job gathered at once, the async listing and
    counts, conditional polls, a cancel."""
    seen = Seen()

    async def tour() -> None:
        async with AsyncClient(platform.url, TOKENS["globex"], transport=AsyncCountingTransport(seen)) as onward:
            batch = await onward.submit_many([{"type": "demo.echo", "params": {"i": i}} for i in range(3)])
            assert batch.created == 3 and all(entry.ok for entry in batch.results)
            job_ids = [entry.job_id for entry in batch.results]
            finals = await asyncio.gather(*(onward.wait(job_id, timeout_s=WAIT_S) for job_id in job_ids))
            assert [final.result.inline for final in finals] == [{"i": i} for i in range(3)]
            listed = {job.job_id async for job in onward.list(status="succeeded", page_size=2)}
            assert set(job_ids) <= listed
            assert (await onward.count()).counts["succeeded"] >= 3
            single = await onward.submit("demo.sleep", {"seconds": 1.5}, priority=3)
            assert (await onward.wait(single.job_id, timeout_s=WAIT_S)).status == "succeeded"
            polls.extend(seen.statuses("GET", f"/jobs/{single.job_id}"))
            sleeping = await onward.submit("demo.sleep", {"seconds": 30})
            assert (await onward.cancel(sleeping.job_id)).status in ("cancelled", "cancel_requested")
            assert (await onward.wait(sleeping.job_id, timeout_s=WAIT_S)).status == "cancelled"
            with pytest.raises(Conflict):
                await onward.cancel(sleeping.job_id)

    polls: list[int] = []
    asyncio.run(tour())
    assert 304 in polls and polls[-1] == 200, polls  # unchanged while it sleeps: conditional reads
