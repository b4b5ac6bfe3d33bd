"""Named fault points: places where a crash drill can kill a component on purpose.

In production no hook is installed and `fault_point` does nothing. A drill installs a hook (usually one
raising `InjectedCrash`) for a name, so the crash happens exactly at that boundary, inside the real code.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Hook = Callable[[str], None]

_hooks: dict[str, Hook] = {}
_lock = threading.Lock()


class InjectedCrash(BaseException):
    """A crash injected at a fault point. A BaseException so no `except Exception` swallows it: the
    component dies there, as it would from a kill."""


def fault_point(name: str) -> None:
    """Mark a crash boundary; runs the hook installed for `name`, if any."""
    hook = _hooks.get(name)
    if hook is not None:
        hook(name)


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

    _hooks[name] = crash
    try:
        yield fired
    finally:
        _hooks.pop(name, None)
