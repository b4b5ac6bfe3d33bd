"""The client's pause, resume and drain calls against the platform as `onward up` runs it (workers polling, the API
behind the local gateway): a paused tenant's jobs stay queued while another tenant's run, explain says `paused`,
a resume lets them run; the drain switch starts nothing anywhere until it is off."""

from __future__ import annotations

import time

import pytest

from onward.client import Client, Forbidden
from onward.store.pauses import FLOW_CACHE_MS
from onward_infra.platform import LocalPlatform
from tests.integration.client.conftest import OPERATOR, TOKENS

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # the platform's pollers read and write streams

SEEN_BY_EVERY_PROCESS_S = FLOW_CACHE_MS / 1000 + 0.5


def test_a_paused_tenant_waits_while_another_runs_and_runs_once_resumed(platform: LocalPlatform) -> None:
    """Catches a pause the workers do not honour (acme's job would succeed), a resume that leaves its job queued,
    and a tenant reaching another's pause."""
    with Client(platform.url, TOKENS["acme"]) as acme, Client(platform.url, TOKENS["globex"]) as globex, \
            Client(platform.url, OPERATOR) as operator:
        changed = acme.pause()
        assert changed.changed and changed.pause.tenant == "acme" and changed.pause.type is None
        with pytest.raises(Forbidden):
            globex.ops_resume(tenant="acme")
        assert [pause.tenant for pause in operator.ops_pauses().pauses] == ["acme"]
        time.sleep(SEEN_BY_EVERY_PROCESS_S)
        held = acme.submit("demo.echo", {"n": 1})
        other = globex.submit("demo.echo", {"n": 2})
        assert globex.wait(other.job_id, timeout_s=60).status == "succeeded"
        time.sleep(SEEN_BY_EVERY_PROCESS_S)  # (workers idle, polling: acme's job is not taken)
        assert acme.get(held.job_id).status == "queued"
        assert acme.pauses().pauses[0].tenant == "acme"
        assert acme.resume().changed
        assert acme.wait(held.job_id, timeout_s=60).status == "succeeded"


def test_the_drain_switch_holds_every_new_start_until_it_is_off(platform: LocalPlatform) -> None:
    """Catches a drain the workers do not see (the job would succeed while it is on), or one that is not lifted."""
    with Client(platform.url, TOKENS["acme"]) as acme, Client(platform.url, OPERATOR) as operator:
        assert operator.drain(True).draining
        time.sleep(SEEN_BY_EVERY_PROCESS_S)
        job = acme.submit("demo.echo", {"n": 3})
        time.sleep(SEEN_BY_EVERY_PROCESS_S)
        assert acme.get(job.job_id).status == "queued"
        assert acme.pauses().draining
        assert operator.drain(False).changed
        assert acme.wait(job.job_id, timeout_s=60).status == "succeeded"


def test_a_paused_type_is_held_aside_while_the_tenants_other_jobs_run_and_comes_back_on_resume(
        platform: LocalPlatform) -> None:
    """Catches the platform's workers starting a paused type's job, its jobs hiding the tenant's other type
    behind them, or a resume that leaves them held (they would never succeed)."""
    with Client(platform.url, TOKENS["acme"]) as acme:
        assert acme.pause(type="demo.sleep").changed
        time.sleep(SEEN_BY_EVERY_PROCESS_S)
        sleeps = [acme.submit("demo.sleep", {"seconds": 0.01}) for _ in range(10)]
        echo = acme.submit("demo.echo", {"n": 4})
        assert acme.wait(echo.job_id, timeout_s=60).status == "succeeded"
        assert {acme.get(job.job_id).status for job in sleeps} == {"queued"}
        resumed = acme.resume(type="demo.sleep")
        assert resumed.changed and not resumed.more
        for job in sleeps:
            assert acme.wait(job.job_id, timeout_s=60).status == "succeeded"
