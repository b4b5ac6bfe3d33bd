"""Powertools metrics that never pile up and stay quiet when there is nothing to say.

With POWERTOOLS_METRICS_DISABLED (on this machine: `onward up`, the tests) Powertools 3.37's flush
prints nothing but also keeps every metric added, so a long local run grows without end and, were
metrics enabled later in the process, an invocation would publish the previous ones' values.
`discard_unflushed` drops whatever the flush left, after each invocation."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

Handler = TypeVar("Handler", bound=Callable[..., Any])

# Powertools warns on every invocation that adds no metric (an API GET, an idle poll): expected here, and
# on a local run it would print a warning per request.
warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)


class ClearableMetrics(Protocol):
    def clear_metrics(self) -> None: ...


def discard_unflushed(metrics: ClearableMetrics) -> Callable[[Handler], Handler]:
    """Decorate OUTSIDE `@metrics.log_metrics`: after the flush, nothing stays buffered."""

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        def invoke(*args: Any, **kwargs: Any) -> Any:
            try:
                return handler(*args, **kwargs)
            finally:
                metrics.clear_metrics()

        return invoke  # type: ignore[return-value]

    return decorate
