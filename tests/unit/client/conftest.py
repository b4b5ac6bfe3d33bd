"""The client's unit tests: its clocks replaced by one fake clock (sleeps are recorded, none is waited)."""

from __future__ import annotations

import types

import pytest

from onward.client import asynchronous, polling, sync
from tests.unit.client.fake_api import Sleeps


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> Sleeps:
    recorded = Sleeps()
    fake_time = types.SimpleNamespace(monotonic=recorded.monotonic, sleep=recorded.sleep)
    for module in (sync, polling, asynchronous):
        monkeypatch.setattr(module, "time", fake_time)
    monkeypatch.setattr(asynchronous, "asyncio", types.SimpleNamespace(sleep=recorded.async_sleep))
    return recorded
