"""Named fault points: places where a crash drill can kill a component on purpose.

In production no hook is installed and `fault_point` does nothing (one dict lookup). A drill installs a
hook (usually one raising `InjectedCrash`) for a name, so the crash happens exactly at that boundary, inside
the real code. A fault point may name its `subject` (the job, attempt or record passing through); a hook
reads it with `fault_subject()`, so a drill can aim a fault at one job instead of at random.

Points in the code (grep `fault_point(` for the exact places):
- worker.after_claim, worker.before_report (subject `<job_id>:<attempt>`), worker.heartbeat (same; a
  crash there ends only the heartbeat thread: the worker goes on and becomes a zombie past its lease);
- store.before_commit, store.after_commit (subject `<transition>:<job_id>`), store.reap.before_transition
  (subject the job id);
- relay.before_put_records, relay.after_put_records;
- projector.after_record (subject `<shard>:<sequence number>`, after the record was projected);
- projector.before_write (subject the job id, before a batch's events of that job are written: a hook that
  raises an Exception there makes that job's records poison, as a drill of onward/pipeline/poison.py);
- archiver.after_write (after a batch's records were written to the archive sink, before the batch is
  acknowledged: a crash there redelivers the batch, written again);
- webhooks.after_record (subject the job id: after the matcher recorded a batch's deliveries, before it queued
  them), webhooks.after_send (subject the delivery id: after the deliverer's POST, before its record is
  updated): a crash at either only delivers again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Hook = Callable[[str], None]

_hooks: dict[str, Hook] = {}
_lock = threading.Lock()
_current = threading.local()


class InjectedCrash(BaseException):
    """A crash injected at a fault point. A BaseException so no `except Exception` swallows it: the
    component dies there, as it would from a kill."""


def fault_point(name: str, subject: str | None = None) -> None:
    """Mark a crash boundary; runs the hook installed for `name`, if any, with `subject` readable through
    `fault_subject()` while it runs."""
    hook = _hooks.get(name)
    if hook is not None:
        previous = getattr(_current, "subject", None)
        _current.subject = subject
        try:
            hook(name)
        finally:
            _current.subject = previous


def fault_subject() -> str | None:
    """Inside a hook: the subject its fault point named (None when it named none)."""
    return getattr(_current, "subject", None)


@contextmanager
def injected(name: str, hook: Hook | None = None, *, times: int = 1) -> Iterator[list[str]]:
    """Within the block, the first `times` passes through `name` run `hook` (default: crash). Yields the
    list of names that fired."""
    fired: list[str] = []

    def crash(point: str) -> None:
        with _lock:
            if len(fired) >= times:
                return
            fired.append(point)
        if hook is None:
            raise InjectedCrash(point)
        hook(point)

    with installed(name, crash):
        yield fired


@contextmanager
def installed(name: str, hook: Hook) -> Iterator[None]:
    """Within the block, every pass through `name` runs `hook`, which decides for itself (a soak's random
    or aimed faults)."""
    _hooks[name] = hook
    try:
        yield
    finally:
        _hooks.pop(name, None)
