"""What the scheduled handlers share, built once per Lambda environment from its variables (JOBS_TABLE,
OUTBOX_TABLE, ONWARD_OUTBOX_RETENTION_DAYS): the JobStore and the heartbeat emitter of this deployment,
over one DynamoDB client (one connection pool)."""

from __future__ import annotations

from functools import cache
from typing import Any

from onward.heartbeat import HeartbeatEmitter
from onward.settings import Settings
from onward.store import JobStore


def job_store() -> JobStore:
    return _store_for(Settings.from_environment())


def heartbeat_emitter() -> HeartbeatEmitter:
    return _emitter_for(Settings.from_environment())


@cache
def _dynamodb_for(settings: Settings) -> Any:
    return settings.client("dynamodb")


@cache
def _store_for(settings: Settings) -> JobStore:
    return JobStore(settings, client=_dynamodb_for(settings))


@cache
def _emitter_for(settings: Settings) -> HeartbeatEmitter:
    return HeartbeatEmitter(_dynamodb_for(settings), settings.require("outbox_table"))
