"""Powertools metrics that never pile up and stay quiet when there is nothing to say.

With POWERTOOLS_METRICS_DISABLED (on this machine: `onward up`, the tests) Powertools 3.37's flush
prints nothing but also keeps every metric added, so a long local run grows without end and, were
metrics enabled later in the process, an invocation would publish the previous ones' values.
`discard_unflushed` drops whatever the flush left, after each invocation."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import ParamSpec, Protocol, TypeVar

Arguments = ParamSpec("Arguments")
Result = TypeVar("Result")

# Powertools warns on every invocation that adds no metric (an API GET, an idle poll): expected here, and
# on a local run it would print a warning per request.
warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)


class ClearableMetrics(Protocol):
    def clear_metrics(self) -> None: ...


def discard_unflushed(
        metrics: ClearableMetrics,
) -> Callable[[Callable[Arguments, Result]], Callable[Arguments, Result]]:
    """Decorate OUTSIDE `@metrics.log_metrics`: after the flush, nothing stays buffered."""

    def decorate(handler: Callable[Arguments, Result]) -> Callable[Arguments, Result]:
        @functools.wraps(handler)
        def invoke(*args: Arguments.args, **kwargs: Arguments.kwargs) -> Result:
            try:
                return handler(*args, **kwargs)
            finally:
                metrics.clear_metrics()

        return invoke

    return decorate
