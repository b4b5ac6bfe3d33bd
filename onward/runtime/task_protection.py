"""ECS task scale-in protection while this task's workers hold jobs: ECS stops whichever tasks it likes on a
scale-in or a deployment (SIGTERM, then the worker's stop timeout, then the job is released and runs again),
so a task holding a job asks the ECS agent not to be chosen ($ECS_AGENT_URI/task-protection/v1/state), and
drops the protection once idle, making it the first to go.

A task that is never idle would never be replaced by a deployment, so protection is held in stretches: from
the moment the task starts holding jobs, new jobs are claimed for `stretch_s`; then claims pause, the running
jobs keep their protection to their own deadlines (their attempt timeout), and once idle the task is
unprotected and claims nothing for `breather_s`, long enough for a waiting deployment or scale-in to stop it.
A deployment thus waits at most a stretch plus the longest attempt timeout, plus the breather."""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from onward.domain.models import MAX_TIMEOUT_S
from onward.runtime.worker import Worker

AGENT_PATH = "/task-protection/v1/state"
MAX_EXPIRES_IN_MINUTES = 2880  # ECS's longest protection per request (48 hours)
RETRY_AFTER_FAILURE_S = 10.0
DEFAULT_STRETCH_S = 3600.0
DEFAULT_BREATHER_S = 60.0
DEFAULT_IDLE_GRACE_S = 5.0
TICK_S = 1.0

logger = logging.getLogger("onward.worker")


class ProtectionAgent(Protocol):
    def set_protection(self, enabled: bool, minutes: int) -> bool:
        """Protect the task for `minutes` (enabled) or drop its protection; whether the agent did."""
        ...


class EcsAgent:
    """The ECS container agent's task protection endpoint (the task role needs ecs:UpdateTaskProtection)."""

    def __init__(self, agent_uri: str, timeout_s: float = 5.0) -> None:
        self._url = agent_uri.rstrip("/") + AGENT_PATH
        self._timeout_s = timeout_s

    def set_protection(self, enabled: bool, minutes: int) -> bool:
        body: dict[str, object] = {"ProtectionEnabled": enabled}
        if enabled:
            body["ExpiresInMinutes"] = minutes
        request = urllib.request.Request(self._url, data=json.dumps(body).encode(), method="PUT",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                answer = json.loads(response.read() or b"{}")
        except (urllib.error.URLError, OSError, ValueError) as error:
            logger.warning("task protection not set", extra={"enabled": enabled, "error": str(error)})
            return False
        if "protection" not in answer:  # {"failure": {...}} or {"error": {...}}: the agent says why
            logger.warning("task protection refused", extra={"enabled": enabled, "answer": answer})
            return False
        return True


class TaskProtection:
    """Decides, from the deadlines of the jobs held now, whether the task is protected and whether its workers
    may claim (see the module's docstring); `update` is called on every change and once a second. A task idle
    for less than `idle_grace_s` keeps its protection (a pool between two jobs is not idle: no request pair per
    job), and its stretch with it."""

    def __init__(self, agent: ProtectionAgent, *, stretch_s: float = DEFAULT_STRETCH_S,
                 breather_s: float = DEFAULT_BREATHER_S, idle_grace_s: float = DEFAULT_IDLE_GRACE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._agent = agent
        self._stretch_s = stretch_s
        self._breather_s = breather_s
        self._idle_grace_s = idle_grace_s
        self._clock = clock
        self._lock = threading.Lock()
        self._protected_until: float | None = None
        self._stretch_started: float | None = None
        self._idle_since: float | None = None
        self._breathing_until: float | None = None  # claims paused until then, unprotected and idle
        self._retry_at = 0.0

    @property
    def protected(self) -> bool:
        return self._protected_until is not None

    def update(self, deadlines: Iterable[float]) -> bool:
        """Protect or unprotect as the held jobs' `deadlines` (clock times) need; whether claims may go on."""
        with self._lock:
            now = self._clock()
            latest = max(deadlines, default=None)
            if latest is None:
                self._idle(now)
            else:
                self._busy(now, latest)
            if self._breathing_until is not None and now >= self._breathing_until:
                self._breathing_until = None
            return self._breathing_until is None and not self._stretch_over(now)

    def _busy(self, now: float, latest: float) -> None:
        self._idle_since = None
        if self._stretch_started is None:
            self._stretch_started = now
        if (self._protected_until is None or latest > self._protected_until) and now >= self._retry_at:
            # Through the stretch and a job as long as this one started at its end: one request a stretch,
            # unless a job with a later deadline comes.
            self._set(True, max(latest, self._stretch_started + self._stretch_s + (latest - now)), now)

    def _idle(self, now: float) -> None:
        if self._idle_since is None:
            self._idle_since = now
        stretch_over = self._stretch_over(now)
        if self._protected_until is not None and now >= self._retry_at and (
                stretch_over or now - self._idle_since >= self._idle_grace_s):
            self._set(False, None, now)
        if self._protected_until is None:
            if stretch_over:
                self._breathing_until = now + self._breather_s
            self._stretch_started = None

    def _stretch_over(self, now: float) -> bool:
        return self._stretch_started is not None and now >= self._stretch_started + self._stretch_s

    def _set(self, enabled: bool, until: float | None, now: float) -> None:
        minutes = min(MAX_EXPIRES_IN_MINUTES, max(1, math.ceil(((until or now) - now) / 60)))
        if self._agent.set_protection(enabled, minutes):
            self._protected_until = now + minutes * 60 if enabled else None
        else:
            self._retry_at = now + RETRY_AFTER_FAILURE_S


def from_environment(environ: Mapping[str, str]) -> TaskProtection | None:
    """The task's protection on ECS (ECS_AGENT_URI, which the agent sets in every container; the stretch from
    ONWARD_WORKER_PROTECTION_MINUTES, the breather from ONWARD_WORKER_BREATHER_S); None elsewhere."""
    agent_uri = environ.get("ECS_AGENT_URI")
    if not agent_uri:
        return None
    stretch_s = float(environ.get("ONWARD_WORKER_PROTECTION_MINUTES") or DEFAULT_STRETCH_S / 60) * 60
    breather_s = float(environ.get("ONWARD_WORKER_BREATHER_S") or DEFAULT_BREATHER_S)
    return TaskProtection(EcsAgent(agent_uri), stretch_s=stretch_s, breather_s=breather_s)


class ProtectionKeeper:
    """A pool's side of TaskProtection: tells it the held jobs' deadlines (when first seen, plus the attempt's
    timeout and the stop grace) on every change and every TICK_S, and pauses or resumes the workers' claims."""

    def __init__(self, protection: TaskProtection, workers: Sequence[Worker], stop_grace_s: float) -> None:
        self._protection = protection
        self._workers = workers
        self._stop_grace_s = stop_grace_s
        self._seen: dict[int, float] = {}  # id of a held JobContext -> its deadline
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="task-protection", daemon=True)

    def start(self) -> None:
        self._ticker.start()

    def stop(self) -> None:
        self._stopped.set()

    def changed(self) -> None:
        with self._lock:
            now = time.monotonic()
            held = {id(context): context for worker in self._workers if (context := worker.held) is not None}
            self._seen = {key: self._seen.get(key) or now + (held[key].timeout_s or MAX_TIMEOUT_S)
                          + self._stop_grace_s for key in held}
            claims = self._protection.update(self._seen.values())
        for worker in self._workers:
            if claims:
                worker.resume_claims()
            else:
                worker.pause_claims()

    def _tick(self) -> None:
        while not self._stopped.wait(TICK_S):
            try:
                self.changed()
            except Exception:
                logger.exception("task protection: the tick failed")
