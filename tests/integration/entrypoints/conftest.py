"""What the Lambda handlers' tests share: the environment template.yaml gives the functions."""

from __future__ import annotations

import pytest


@pytest.fixture
def lambda_environment(stack_environment: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The stack's variables plus what template.yaml sets for the functions (JWT auth, worker module)."""
    monkeypatch.setenv("ONWARD_AUTH", "jwt")
    monkeypatch.setenv("ONWARD_TENANT_CLAIM", "tenant")
    monkeypatch.setenv("ONWARD_WORKER_MODULE", "onward.runtime.demo_jobs")
    monkeypatch.setenv("ONWARD_WORKER_LEASE_S", "5")
    for name in ("ONWARD_TOKENS", "ONWARD_OPERATOR_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    return stack_environment
