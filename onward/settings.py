"""Resource names and endpoint, read from the environment (`onward endpoint` prints them; SAM sets them).

Each resource of template.yaml named `<Thing>Table` / `<Thing>Stream` reaches the code as the variable
`<THING>_TABLE` / `<THING>_STREAM`. A component asks only for the names it uses (`settings.require`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

_CLIENT_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 8},
    connect_timeout=5,
    read_timeout=30,
    max_pool_connections=64,
)

DEFAULT_OUTBOX_RETENTION_DAYS = 7
_RESOURCES = ("jobs_table", "outbox_table", "status_table", "checkpoint_table", "conflicts_table",
              "parked_table", "events_stream")


class MissingSetting(RuntimeError):
    """A variable the code needs is not set."""


def environment_variable(resource: str) -> str:
    """`jobs_table` -> `JOBS_TABLE`."""
    return resource.upper()


@dataclass(frozen=True)
class Settings:
    jobs_table: str | None = None
    outbox_table: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    status_table: str | None = None
    checkpoint_table: str | None = None
    conflicts_table: str | None = None
    parked_table: str | None = None
    events_stream: str | None = None
    outbox_retention_days: int = DEFAULT_OUTBOX_RETENTION_DAYS  # the TTL writers stamp on outbox events

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> Settings:
        source = os.environ if environ is None else environ
        names = {resource: source.get(environment_variable(resource)) or None for resource in _RESOURCES}
        return cls(
            endpoint_url=source.get("AWS_ENDPOINT_URL") or None,
            region=source.get("AWS_DEFAULT_REGION") or source.get("AWS_REGION") or None,
            outbox_retention_days=int(source.get("ONWARD_OUTBOX_RETENTION_DAYS") or DEFAULT_OUTBOX_RETENTION_DAYS),
            **names,
        )

    def require(self, resource: str) -> str:
        """The name of a resource this component needs; MissingSetting names the variable to set."""
        if resource not in _RESOURCES:
            raise ValueError(f"unknown resource {resource!r}")
        value = getattr(self, resource)
        if not value:
            raise MissingSetting(
                f"{environment_variable(resource)} is not set (run `onward endpoint` and paste its export lines)"
            )
        return value

    def client(self, service: str) -> Any:
        """A boto3 client with botocore's standard retry mode (throttling and transient errors)."""
        return boto3.client(service, endpoint_url=self.endpoint_url, region_name=self.region, config=_CLIENT_CONFIG)
