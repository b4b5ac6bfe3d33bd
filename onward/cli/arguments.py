"""What every command of `onward` shares: argparse types that refuse a value that cannot work at start,
the help formatter that shows defaults, and waiting for Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import math
import signal
import threading
from collections.abc import Callable

from onward.domain.clock import parse_instant


def interrupt() -> None:
    raise KeyboardInterrupt


def interruptible() -> None:
    """Ctrl-C (SIGINT) raises KeyboardInterrupt even where the process started with SIGINT ignored, as a shell
    starts a background job and its children: EndpointProcess.stop and tests stop a child with SIGINT."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def wait_for_interrupt(stop: threading.Event) -> None:
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        stop.set()


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

