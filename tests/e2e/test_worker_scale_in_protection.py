"""A long job keeps its single attempt across a scale-in and a rolling deployment on the local stack: real
`onward worker` processes as the tasks of an ECS service (onward_infra.ecs_service: each with an ECS agent
endpoint for task scale-in protection, stopped with SIGTERM as ECS stops them, never while protected). The
10-minute job is scaled down to 12 s; the worker's stop timeout (5 s here) is far shorter, so a stop of the
busy task would release the job and run it again."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from onward.domain.models import NewJob
from onward.domain.states import JobState, RunOutcome
from onward.settings import Settings
from onward.store.service import JobStore
from onward_infra.ecs_service import AgentEndpoint, LocalEcsService
from tests.e2e.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.own_stack]  # its jobs write the outbox (a stream)

ROOT = Path(__file__).resolve().parents[2]
WORKER = [sys.executable, "-m", "onward.cli", "worker", "--module", "onward.runtime.demo_jobs",
          "--concurrency", "1", "--lease-s", "10"]
LONG_JOB_S = 12


@pytest.fixture
def agent() -> Iterator[AgentEndpoint]:
    endpoint = AgentEndpoint().start()
    yield endpoint
    endpoint.stop()


def test_a_long_job_keeps_its_single_attempt_across_a_scale_in_and_a_rolling_deploy_and_idle_tasks_go_first(
        environment: dict[str, str], settings: Settings, dynamodb: Any, agent: AgentEndpoint) -> None:
    """Breaks without the worker's protection (the scale-in or the deployment stops the busy task: the job is
    released after the 5 s stop timeout and runs a second attempt) and without dropping it when idle (the
    scale-in finds no task it may stop, the deployment never stops the old task)."""
    store = JobStore(settings, client=dynamodb)
    service = LocalEcsService(WORKER, {**os.environ, **environment, "ONWARD_WORKER_STOP_TIMEOUT_S": "5"}, agent)
    try:
        busy, idle = service.start_task(), service.start_task()
        job = store.create("acme", NewJob(type="demo.sleep", params={"seconds": LONG_JOB_S})).job.job_id
        wait_until(lambda: store.get(job).state is JobState.RUNNING, 60, "the long job to run")
        wait_until(lambda: any(agent.protected(t.task_id) for t in (busy, idle)), 30, "a task to protect itself")
        if agent.protected(idle.task_id):
            busy, idle = idle, busy
        assert not agent.protected(idle.task_id)

        assert service.scale_in(1, timeout_s=30) == [idle]  # the idle task goes first
        assert store.get(job).state is JobState.RUNNING

        assert service.rolling_deploy(timeout_s=LONG_JOB_S + 60) == [busy]  # waited for the job to end
        ended = store.get(job)
        assert ended.state is JobState.SUCCEEDED and ended.attempt == 1
        assert [run.outcome for run in store.recorder.runs(job)] == [RunOutcome.SUCCEEDED]
        assert busy.process.returncode == idle.process.returncode == 0
        requests = agent.protections[busy.task_id].requests
        assert requests[0]["ProtectionEnabled"] is True and requests[-1] == {"ProtectionEnabled": False}
    finally:
        service.stop_all()
