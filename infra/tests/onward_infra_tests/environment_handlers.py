"""Lambda handlers that infra/tests/onward_infra_tests/test_execution_environments.py runs in execution environments
(infra/onward_infra/environments.py imports them by path in a process of their own)."""

from __future__ import annotations

import os
import time
from typing import Any

_held: dict[str, Any] = {}  # module state, as Powertools keeps the current event: one per environment


def hold(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Keeps the event's `tag` in module state for `hold_s`, then answers what the state holds then."""
    _held["tag"] = event["tag"]
    time.sleep(event.get("hold_s", 0.0))
    return {"tag": _held["tag"], "pid": os.getpid(), "function": context.function_name,
            "request_id": context.aws_request_id}


def fail(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Raises with the event's secret in the message, or ends its process at once (`die`)."""
    if event.get("die"):
        os._exit(3)
    raise ValueError(f"refusing {event['secret']}")


def answer_pid(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"pid": os.getpid()}
