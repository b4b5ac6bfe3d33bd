"""Resource names and endpoint, read from the environment (`onward endpoint` prints them; SAM sets them)."""

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


class MissingSetting(RuntimeError):
    """A variable the code needs is not set."""


def required(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise MissingSetting(f"{name} is not set (run `onward endpoint` and paste its export lines)")
    return value


@dataclass(frozen=True)
class Settings:
    jobs_table: str
    outbox_table: str
    endpoint_url: str | None = None
    region: str | None = None

    @classmethod
    def from_environment(cls) -> Settings:
        return cls(
            jobs_table=required("JOBS_TABLE"),
            outbox_table=required("OUTBOX_TABLE"),
            endpoint_url=os.environ.get("AWS_ENDPOINT_URL") or None,
            region=os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION") or None,
        )

    def client(self, service: str) -> Any:
        """A boto3 client with botocore's standard retry mode (throttling and transient errors)."""
        return boto3.client(service, endpoint_url=self.endpoint_url, region_name=self.region, config=_CLIENT_CONFIG)
