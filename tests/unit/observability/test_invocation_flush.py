"""When a Lambda handler's records are exported: before the invocation returns on Lambda, by the SDK's own
thread elsewhere."""

from __future__ import annotations

import pytest

from onward.observability import otlp

pytestmark = pytest.mark.fast


@pytest.fixture
def flushes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr(otlp, "flush", lambda: calls.append("flush"))
    return calls


def test_on_lambda_an_invocation_exports_before_it_returns_even_when_it_raises(
        flushes: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches a handler whose spans stay buffered in a Lambda environment that is frozen (or never thawed)
    after the invocation: lost, and a failed invocation's the most wanted."""
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "onward-projector")

    @otlp.exports_after_invocation
    def failing(event: dict, context: object) -> dict:
        raise RuntimeError("batch failed")

    with pytest.raises(RuntimeError):
        failing({}, None)
    assert flushes == ["flush"]


def test_off_lambda_an_invocation_leaves_the_export_to_the_sdk(flushes: list[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches the local stack's pollers flushing on every call: with the collector down, every poll of the
    relay and the projector waited out the flush timeout and the status view fell minutes behind (the demo of
    `onward up --otlp` never finished before the tour's receiver started)."""
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)

    @otlp.exports_after_invocation
    def handler(event: dict, context: object) -> dict:
        return {"batchItemFailures": []}

    assert handler({}, None) == {"batchItemFailures": []}
    assert flushes == []
