"""A lean boto3 client for the embedded endpoint: transport, codec and calls without botocore's
per-call machinery. Plugged in from outside the product (ONWARD_CLIENT_WRAPPER)."""

from __future__ import annotations

from typing import Any

from onward.settings import Settings
from onward_infra.lean_client.calls import use_lean_calls
from onward_infra.lean_client.codec import use_lean_json
from onward_infra.lean_client.http import use_lean_http

# What the embedded endpoint exports as ONWARD_CLIENT_WRAPPER.
WRAPPER = "onward_infra.lean_client:lean_client"


def lean_client(client: Any, settings: Settings) -> Any:
    """`client` sending through the lean transport, codec and calls: the ONWARD_CLIENT_WRAPPER of the embedded
    endpoint's environment. ValueError for an endpoint that is not plain HTTP (AWS, TLS)."""
    del settings  # the client carries its endpoint and config
    return use_lean_calls(use_lean_json(use_lean_http(client)))
