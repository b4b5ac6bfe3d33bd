"""A job type's retry policy and snooze bounds (pure): how many attempts, how long between them, which error
types are permanent, how often a handler may snooze, and the declaration a worker publishes of it.

A worker declares the policy with its type (`Registry.register("t", retry=RetryPolicy(...))`); the worker
uses it when an attempt of the type fails (`delay_s`, `is_permanent`) or snoozes (`max_snoozes`), and
publishes it to the store on start (onward.store.job_types) so that the API fills a job's max_attempts from
it and `explain`, GET /types and the page show it. A type nobody declared a policy for runs under
`PLATFORM_POLICY` (the platform's defaults: 3 attempts, 1 s doubling to 300 s, equal jitter).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from onward.domain.backoff import BackoffPolicy

Jitter = Literal["full", "equal", "none"]
JITTERS: tuple[str, ...] = get_args(Jitter)

MAX_ATTEMPTS = 100  # as NewJob.max_attempts allows
DEFAULT_MAX_ATTEMPTS = 3  # NewJob's default: a job of a type without a policy
MAX_BACKOFF_S = 7 * 86_400  # the longest wait between two attempts a policy may ask for
DEFAULT_MAX_SNOOZES = 100  # snoozes one job may take before a snooze counts as a failed attempt
MAX_SNOOZES = 10_000
MAX_SNOOZE_S = 7 * 86_400  # the longest one snooze may be
MAX_PERMANENT_ERRORS = 50
MAX_ERROR_TYPE = 200  # characters in one permanent error type's name


class InvalidRegistration(ValueError):
    """A handler registered with settings the platform refuses (a type's timeout_s out of range, a retry policy
    out of its bounds): the message names the field and its bounds."""


def _number(name: str, value: object, *, low: float, high: float, low_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidRegistration(f"retry policy: {name} must be a number, not {value!r}")
    if value > high or value < low or (low_open and value == low):
        bound = f"above {low:g}" if low_open else f"at least {low:g}"
        raise InvalidRegistration(f"retry policy: {name} must be {bound} and at most {high:g}, not {value!r}")
    return float(value)


def _count(name: str, value: object, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InvalidRegistration(f"retry policy: {name} must be a whole number from 1 to {high}, not {value!r}")
    return value


@dataclass(frozen=True)
class RetryPolicy:
    """How a job type's failed attempts are retried. `max_attempts`: what a job of the type created without
    its own max_attempts gets. The delay after the n-th charged attempt is drawn under base_s * 2^(n-1), capped
    at `cap_s`: `jitter` "equal" draws from [ceiling/2, ceiling], "full" from [0, ceiling], "none" waits the
    ceiling (docs/flow-control.md). `permanent`: error type names (an exception's class name, as
    the run record shows it) that end the job dead at once. `max_snoozes`: snoozes one job may take
    (onward.runtime.snooze); past it a snooze is a failed attempt. InvalidRegistration for a value out of
    bounds."""

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    base_s: float = 1.0
    cap_s: float = 300.0
    jitter: Jitter = "equal"
    permanent: tuple[str, ...] = field(default=())
    max_snoozes: int = DEFAULT_MAX_SNOOZES

    def __post_init__(self) -> None:
        _count("max_attempts", self.max_attempts, MAX_ATTEMPTS)
        _count("max_snoozes", self.max_snoozes, MAX_SNOOZES)
        _number("base_s", self.base_s, low=0, high=MAX_BACKOFF_S, low_open=True)
        _number("cap_s", self.cap_s, low=0, high=MAX_BACKOFF_S, low_open=True)
        if self.cap_s < self.base_s:
            raise InvalidRegistration(f"retry policy: cap_s ({self.cap_s:g}) must be at least base_s ({self.base_s:g})")
        if self.jitter not in JITTERS:
            raise InvalidRegistration(f"retry policy: jitter must be one of {', '.join(JITTERS)}, not {self.jitter!r}")
        if isinstance(self.permanent, str) or not isinstance(self.permanent, tuple | list | frozenset | set):
            raise InvalidRegistration("retry policy: permanent must be a tuple of error type names, e.g. "
                                      f"('ValueError',), not {self.permanent!r}")
        names = tuple(self.permanent)
        if len(names) > MAX_PERMANENT_ERRORS or not all(
                isinstance(name, str) and 0 < len(name) <= MAX_ERROR_TYPE and name.isprintable() for name in names):
            raise InvalidRegistration(f"retry policy: permanent holds at most {MAX_PERMANENT_ERRORS} error type "
                                      f"names of 1 to {MAX_ERROR_TYPE} printable characters, not {names!r}")
        object.__setattr__(self, "permanent", tuple(dict.fromkeys(names)))

    @property
    def backoff(self) -> BackoffPolicy:
        return BackoffPolicy(base_s=self.base_s, cap_s=self.cap_s, jitter=self.jitter)

    def delay_s(self, attempts_used: int, rng: random.Random | None = None) -> float:
        """The wait before the next attempt after `attempts_used` charged attempts (1-based)."""
        return self.backoff.delay(max(1, attempts_used), rng)

    def is_permanent(self, error_type: str) -> bool:
        return error_type in self.permanent

    def to_document(self) -> dict[str, Any]:
        """As stored and answered (JSON): the fields by name, `permanent` a list."""
        return {"max_attempts": self.max_attempts, "base_s": self.base_s, "cap_s": self.cap_s,
                "jitter": self.jitter, "permanent": list(self.permanent), "max_snoozes": self.max_snoozes}

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> RetryPolicy:
        """From `to_document`'s form (numbers may come back as Decimal or int): InvalidRegistration when it is
        not a policy this code accepts."""
        try:
            return cls(max_attempts=int(document["max_attempts"]), base_s=float(document["base_s"]),
                       cap_s=float(document["cap_s"]), jitter=document["jitter"],
                       permanent=tuple(document.get("permanent") or ()),
                       max_snoozes=int(document.get("max_snoozes", DEFAULT_MAX_SNOOZES)))
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidRegistration(f"retry policy: not a stored policy ({error})") from error


PLATFORM_POLICY = RetryPolicy()


@dataclass(frozen=True)
class JobTypeDeclaration:
    """One job type as a worker declared it: its policy, and who declared it when (the last declaration wins:
    workers of two versions declaring different policies take turns, each start overwriting; `declared_by`
    and `worker_version` say whose is in force)."""

    job_type: str
    policy: RetryPolicy
    declared_by: str  # the declaring worker pool's id
    worker_version: str  # the onward package version the declaring worker ran
    declared_at: int  # epoch ms

    def to_document(self) -> dict[str, Any]:
        return {"job_type": self.job_type, "policy": self.policy.to_document(), "declared_by": self.declared_by,
                "worker_version": self.worker_version, "declared_at": self.declared_at}

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> JobTypeDeclaration:
        return cls(str(document["job_type"]), RetryPolicy.from_document(document["policy"]),
                   str(document["declared_by"]), str(document["worker_version"]), int(document["declared_at"]))


def check_snooze_s(seconds: object) -> float:
    """A snooze's length in seconds: above 0 and at most MAX_SNOOZE_S (ValueError otherwise)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds) \
            or not 0 < seconds <= MAX_SNOOZE_S:
        raise ValueError(f"a snooze is a number of seconds above 0 and at most {MAX_SNOOZE_S} (7 days), "
                         f"not {seconds!r}")
    return float(seconds)
