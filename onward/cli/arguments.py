"""What every command of `onward` shares: argparse types that refuse a value that cannot work at start,
the help formatter that shows defaults, and waiting for Ctrl-C or SIGTERM (StopSignals)."""

from __future__ import annotations

import argparse
import math
import signal
import time
from collections.abc import Callable

from onward.domain.clock import parse_instant

SIGNAL_POLL_S = 0.2  # how soon a command waiting for Ctrl-C notices it


def interrupt() -> None:
    raise KeyboardInterrupt


def interruptible() -> None:
    """Ctrl-C (SIGINT) raises KeyboardInterrupt even where the process started with SIGINT ignored, as a shell
    starts a background job and its children: EndpointProcess.stop and tests stop a child with SIGINT."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


class StopSignals:
    """From when it is made on, Ctrl-C (SIGINT) and SIGTERM are only counted, also where the process started
    with SIGINT ignored (a shell's background job, a CI script's children). Made before a command prints that
    it runs. The handler takes no lock: Python runs it in the main thread between two bytecodes, so one that
    set a threading.Event could wait forever for the Event's lock the main thread held inside Event.wait; a
    KeyboardInterrupt could escape a print, or come between a `with`'s acquire and its exit, a lock held."""

    def __init__(self) -> None:
        self.count = 0
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, self._count)

    def _count(self, number: int, frame: object) -> None:
        self.count += 1

    def wait(self, beyond: int = 0) -> None:
        """Until more than `beyond` signals came (a sleep: a signal cuts it short, the handler runs)."""
        while self.count <= beyond:
            time.sleep(SIGNAL_POLL_S)


def bounded(kind: type[int | float], low: float, high: float | None = None,
             *, low_inclusive: bool = True) -> Callable[[str], float]:
    """An argparse type: a number of `kind` within [low, high] (or (low, high] without low_inclusive), so
    a value that cannot work is refused at start with the rule, not met later as a spinning loop."""
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if not math.isfinite(value) or value < low or (value == low and not low_inclusive) or (
                high is not None and value > high):
            low_text = f">= {low:g}" if low_inclusive else f"> {low:g}"
            raise argparse.ArgumentTypeError(
                f"{text} is out of range: {low_text}" + ("" if high is None else f" and <= {high:g}"))
        return value

    return parse


class DefaultsShown(argparse.HelpFormatter):
    """--help shows each flag's default, where it has one worth saying (not None, False or an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default in (None, False, [], argparse.SUPPRESS) or "%(default)" in text:
            return text
        return f"{text} (default: %(default)s)"


PORT = bounded(int, 0, 65535)


POSITIVE_SECONDS = bounded(float, 0, low_inclusive=False)


def instant(text: str) -> int:
    try:
        return parse_instant(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None

