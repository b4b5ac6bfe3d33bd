"""The client's rate limit calls against the platform as `onward up` runs it (issue 37): set a limit, read and
list it, submit jobs naming its key (two start at once, the third waits for its reserved token), delete it.

Catches a client call that builds the wrong route or body (the API refuses it: InvalidRequest / NotFound), and an
answer model that drops the limit's fields."""

from __future__ import annotations

import time

import pytest

from onward.client import Client, InvalidRequest, NotFound
from onward_infra.platform import LocalPlatform
from tests.integration.client.conftest import TOKENS

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # the platform's pollers read and write streams


def test_the_client_sets_reads_lists_and_deletes_a_rate_limit(platform: LocalPlatform) -> None:
    with Client(platform.url, TOKENS["acme"]) as onward:
        made = onward.set_rate_limit("partner-api", 2, 3600)
        assert (made.key, made.limit, made.period_s) == ("partner-api", 2, 3600.0)
        assert onward.rate_limit("partner-api") == made and onward.rate_limits() == [made]
        with pytest.raises(InvalidRequest):
            onward.set_rate_limit("partner-api", 0, 1)
        jobs = [onward.submit("demo.echo", {}, rate_limit_key="partner-api").job_id for _ in range(3)]
        deadline = time.monotonic() + 30
        while sum(platform.store.get(job_id).rate_reserved_at is not None for job_id in jobs) < 1:
            assert time.monotonic() < deadline, "no job reserved a token"
            time.sleep(0.2)
        # two tokens an hour: the third job waits for its reserved one (within the hour)
        assert sum(platform.store.get(job_id).state.value == "queued" for job_id in jobs) == 1
        onward.delete_rate_limit("partner-api")
        with pytest.raises(NotFound):
            onward.rate_limit("partner-api")
        assert onward.rate_limits() == []
