"""Built-in job types for demos and drills: demo.echo, demo.sleep, demo.flaky, demo.fail, demo.crash, demo.hang,
demo.progress, demo.snooze."""

from __future__ import annotations

import time
from typing import Any

from onward.runtime.worker import JobContext, PermanentError, Registry, RetryPolicy, SimulatedCrash, Snooze

registry = Registry()


@registry.register("demo.echo")
def echo(context: JobContext) -> Any:
    """Returns its params."""
    return context.params


@registry.register("demo.sleep")
def sleep(context: JobContext) -> dict[str, float]:
    """Sleeps `seconds` (default 2), stopping early when cancelled."""
    seconds = float(context.params.get("seconds", 2))
    context.wait(seconds)
    return {"slept_s": seconds}


@registry.register("demo.flaky")
def flaky(context: JobContext) -> dict[str, int]:
    """Fails its first `failures` attempts (default 1), then succeeds."""
    failures = int(context.params.get("failures", 1))
    if context.attempt <= failures:
        raise ConnectionError(f"simulated transient failure on attempt {context.attempt}")
    return {"succeeded_on_attempt": context.attempt}


@registry.register("demo.fail")
def fail(context: JobContext) -> None:
    """Always fails; with `permanent: true` it is not retried."""
    if context.params.get("permanent"):
        raise PermanentError("simulated permanent failure")
    raise RuntimeError("simulated failure")


@registry.register("demo.crash")
def crash(context: JobContext) -> None:
    """Kills its worker every time (the lease lapses); the job ends quarantined."""
    raise SimulatedCrash()


@registry.register("demo.hang")
def hang(context: JobContext) -> dict[str, float]:
    """Sleeps `seconds` (default 3600) deaf to every cooperative stop (cancel, lost lease, shutdown): only its
    timeout, or the worker ending its process, stops it. For drills."""
    seconds = float(context.params.get("seconds", 3600))
    time.sleep(seconds)  # not context.wait: it never looks at the context
    return {"slept_s": seconds}


# progress (issue 38)
@registry.register("demo.progress")
def progress(context: JobContext) -> dict[str, int]:
    """Works through `steps` steps (default 10) of `step_s` seconds each (default 1), reporting its progress
    after each one ("step i of N"); stops early when cancelled."""
    steps = int(context.params.get("steps", 10))
    step_s = float(context.params.get("step_s", 1.0))
    context.progress(0.0, f"starting {steps} steps")
    for step in range(1, steps + 1):
        context.wait(step_s)
        context.progress(step / steps if steps else 1.0, f"step {step} of {steps}")
    return {"steps": steps}


# snooze and retry policies (issue 37)
@registry.register("demo.snooze", retry=RetryPolicy(max_attempts=2, base_s=1, cap_s=10, max_snoozes=10))
def snooze(context: JobContext) -> dict[str, int]:
    """Snoozes `seconds` (default 2) on each of its first `times` attempts (default 1), not charged, then
    succeeds; its type allows 10 snoozes (past them a snooze is a failed attempt) and 2 attempts."""
    if context.attempt <= int(context.params.get("times", 1)):
        raise Snooze(float(context.params.get("seconds", 2)))
    return {"succeeded_on_attempt": context.attempt}
