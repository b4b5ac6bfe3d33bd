"""The soak's worker side, in a process of its own: its workers, its reaper, and every fault aimed at them.

Why a process: the workers' claims and reports are most of the soak's client work, and in the driver's process
they shared one interpreter lock with the submitters, the relay and the projector (the workers held it about
60% of the time, and the pipeline fell thousands of jobs behind). On AWS they are separate too: the ECS
service runs the workers, Lambda the reaper, relay and projector.

What runs here, as it ran in the driver's process before:
- `workers` onward.runtime.worker.Worker threads; one that dies (InjectedCrash) is replaced by a new one with a new id;
- the reaper (onward.maintenance.reaper.reap_once every `Start.reaper_every_s`) and the pipeline heartbeats (every
  `Start.heartbeat_s`), restarted when it dies;
- the faults at the points these pass: random crashes at worker.*, store.* (their transitions) and the
  reaper's; the aimed faults at the aimed jobs' first attempts (the driver names the jobs: `Start.aims`).
The driver's process keeps the submitters, the planned cancels, the relay and the projector (and their faults).

Protocol (`python -m tests.soak.workers`, run by `WorkerSideProcess`): one JSON line on stdin (`Start`), then
the side runs until a second line (or the end of stdin: its driver died), stops its components as the driver
did (workers finish their job), and writes its `SideReport` as JSON to `Start.report_path`.
"""

from __future__ import annotations

import os

os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")  # before the loggers are built on import
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

import dataclasses
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from onward.bootstrap import Deployment
from onward.domain.backoff import BackoffPolicy
from onward.domain.states import JobState
from onward.faults import InjectedCrash, fault_subject, installed
from onward.maintenance.reaper import reap_once
from onward.runtime.worker import JobContext, Registry, Worker
from onward.store.service import JobStore
from tests.soak.faults import RANDOM_POINTS, Aim, FaultRates, RandomFaults, job_of

JOB_TYPE = "soak.work"
REPO_ROOT = Path(__file__).resolve().parents[2]
WORKER_POINTS = tuple(point for point in RANDOM_POINTS if point.startswith(("worker.", "store.")))


def soak_handler(context: JobContext) -> dict[str, Any]:
    """The soak's job: waits `ms` (waking up on cancel or a lost lease), fails its first `fail_attempts`
    attempts, and returns its fencing token so the audit can tell which attempt's result was stored."""
    context.wait(context.params.get("ms", 5) / 1000)
    if context.attempt <= context.params.get("fail_attempts", 0):
        raise RuntimeError(f"flaky attempt {context.attempt}")
    return {"attempt": context.attempt, "token": context.fencing_token}


def soak_store(deployment: Deployment) -> JobStore:
    """The store every soak component uses: the deployment's, with short backoffs."""
    settings = deployment.settings
    return JobStore(settings, client=settings.client("dynamodb"), backoff=BackoffPolicy(base_s=0.05, cap_s=0.5))


class Supervised:
    """A component loop in a thread that is restarted (rebuilt by `make`) each time an injected crash
    kills it."""

    def __init__(self, name: str, make: Callable[[], Callable[[], None]], stop: threading.Event) -> None:
        self.name = name
        self.restarts = 0
        self.errors = 0  # exceptions that were not injected (each is logged)
        self._make = make
        self._stop = stop
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Supervised:
        self._thread.start()
        return self

    def join(self, timeout: float = 30.0) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            loop = self._make()
            try:
                loop()
            except InjectedCrash:
                self.restarts += 1
            except Exception as error:  # noqa: BLE001 - a real failure: restarted like Lambda, and counted
                self.errors += 1
                print(f"soak: {self.name} failed: {error!r}", file=sys.stderr)
                time.sleep(0.05)


def tally(components: list[Supervised]) -> tuple[Counter[str], Counter[str]]:
    """Restarts and real errors of `components`, by kind (the name before its first '-')."""
    restarts: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for component in components:
        kind = component.name.split("-")[0]
        restarts[kind] += component.restarts
        errors[kind] += component.errors
    return restarts, errors


@contextmanager
def quiet_injected_thread_deaths() -> Iterator[None]:
    """A thread ended by an injected crash (a worker's heartbeat thread) prints no traceback."""
    previous = threading.excepthook

    def quiet(args: threading.ExceptHookArgs) -> None:
        if not issubclass(args.exc_type, InjectedCrash):
            previous(args)

    threading.excepthook = quiet
    try:
        yield
    finally:
        threading.excepthook = previous


@dataclass(frozen=True)
class Start:
    """What the driver tells a worker side."""

    workers: int
    lease_s: float
    reaper_every_s: float | None  # None: no reaper (nor heartbeats) on this side: another side runs it
    heartbeat_s: float
    seed: int
    rates: FaultRates
    aims: dict[str, Aim]  # job id -> the fault aimed at its first attempt
    report_path: str

    def to_json(self) -> str:
        return json.dumps({**dataclasses.asdict(self), "aims": {job: str(aim) for job, aim in self.aims.items()}})

    @classmethod
    def from_json(cls, line: str) -> Start:
        values = json.loads(line)
        return cls(**{**values, "rates": FaultRates(**values["rates"]),
                      "aims": {job: Aim(aim) for job, aim in values["aims"].items()}})


@dataclass
class SideReport:
    """What a worker side did, for the audit (merged over every side the run started)."""

    fired: Counter[str] = field(default_factory=Counter)  # fault kind -> times it fired
    restarts: Counter[str] = field(default_factory=Counter)  # component kind -> injected deaths
    errors: Counter[str] = field(default_factory=Counter)  # component kind -> real failures
    zombies: set[str] = field(default_factory=set)
    raced: set[str] = field(default_factory=set)
    cancelled_running: set[str] = field(default_factory=set)
    cancel_answers: list[tuple[str, str, str]] = field(default_factory=list)

    def merge(self, other: SideReport) -> None:
        self.fired.update(other.fired)
        self.restarts.update(other.restarts)
        self.errors.update(other.errors)
        self.zombies |= other.zombies
        self.raced |= other.raced
        self.cancelled_running |= other.cancelled_running
        self.cancel_answers += other.cancel_answers

    def to_json(self) -> str:
        return json.dumps({"fired": self.fired, "restarts": self.restarts, "errors": self.errors,
                           "zombies": sorted(self.zombies), "raced": sorted(self.raced),
                           "cancelled_running": sorted(self.cancelled_running),
                           "cancel_answers": self.cancel_answers})

    @classmethod
    def from_json(cls, text: str) -> SideReport:
        values = json.loads(text)
        return cls(Counter(values["fired"]), Counter(values["restarts"]), Counter(values["errors"]),
                   set(values["zombies"]), set(values["raced"]), set(values["cancelled_running"]),
                   [tuple(answer) for answer in values["cancel_answers"]])  # type: ignore[misc]


class WorkerSide:
    """The workers and the reaper on `deployment`, with the faults at the points they pass."""

    def __init__(self, deployment: Deployment, start: Start) -> None:
        self._deployment = deployment
        self._start = start
        self.store = soak_store(deployment)
        self._aims = start.aims
        self._random = RandomFaults(start.rates, start.seed)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._components: list[Supervised] = []
        self._exits = ExitStack()
        self._aimed_fired: Counter[str] = Counter()
        self._zombies: set[str] = set()
        self._raced: set[str] = set()
        self._cancelled_running: set[str] = set()
        self._cancel_answers: list[tuple[str, str, str]] = []
        self._found_by_reaper: dict[str, threading.Event] = {}
        self._reporting: dict[str, threading.Event] = {}
        self._reaper_met: set[str] = set()

    def start(self) -> WorkerSide:
        hooks: dict[str, Callable[[str], None]] = {point: self._random_hook(point) for point in WORKER_POINTS}
        hooks |= {"worker.after_claim": self._after_claim, "worker.before_report": self._before_report,
                  "worker.heartbeat": self._heartbeat, "store.reap.before_transition": self._reap_transition}
        self._exits.enter_context(quiet_injected_thread_deaths())
        for point, hook in hooks.items():
            self._exits.enter_context(installed(point, hook))
        self._components = [Supervised(f"worker-{n}", self._worker_loop, self._stop).start()
                            for n in range(self._start.workers)]
        if self._start.reaper_every_s is not None:
            self._components.append(Supervised("reaper", self._reaper_loop, self._stop).start())
        return self

    def stop(self) -> SideReport:
        """Stop as `onward up` does on Ctrl-C (workers stop claiming and finish their jobs); what happened."""
        self._stop.set()
        for component in self._components:
            component.join()
        self._exits.close()
        restarts, errors = tally(self._components)
        with self._lock:
            return SideReport(Counter(self._random.fired) + self._aimed_fired, restarts, errors,
                              set(self._zombies), set(self._raced), set(self._cancelled_running),
                              list(self._cancel_answers))

    # --- the components ---------------------------------------------------------------------------------

    def _worker_loop(self) -> Callable[[], None]:
        registry = Registry()
        registry.register(JOB_TYPE)(soak_handler)
        worker = Worker(self.store, registry, lease_s=self._start.lease_s, idle_s=0.1, idle_max_s=1.0)
        stop = self._stop

        def loop() -> None:
            ended = threading.Event()

            def watch() -> None:  # shuts the worker down at the soak's stop; ends with the loop (a crash)
                while not stop.wait(0.2):
                    if ended.is_set():
                        return
                worker.shutdown()

            threading.Thread(target=watch, daemon=True).start()
            try:
                worker.run()
            finally:
                ended.set()
        return loop

    def _reaper_loop(self) -> Callable[[], None]:
        emitter = self._deployment.heartbeat_emitter
        reaper_every_s = self._start.reaper_every_s
        assert reaper_every_s is not None

        def loop() -> None:
            next_reap = next_beat = time.monotonic()
            while not self._stop.wait(0.2):
                if time.monotonic() >= next_reap:
                    next_reap = time.monotonic() + reaper_every_s
                    reap_once(self.store)
                if time.monotonic() >= next_beat:
                    emitter.emit()
                    next_beat = time.monotonic() + self._start.heartbeat_s
        return loop

    # --- faults ---------------------------------------------------------------------------------------

    def _aimed(self, token: str | None) -> Aim | None:
        """The aimed fault of this passing attempt: only a first attempt (`<job>:1`) is aimed at."""
        if token is None:
            return None
        job_id, _, attempt = token.rpartition(":")
        return self._aims.get(job_id) if attempt == "1" else None

    def _spared(self, subject: str | None) -> bool:
        """Aimed jobs get no random faults (their audit knows exactly what happened to them)."""
        return job_of(subject) in self._aims

    def _fire(self, name: str) -> None:
        with self._lock:
            self._aimed_fired[name] += 1

    def _random_hook(self, point: str) -> Callable[[str], None]:
        def hook(name: str) -> None:
            subject = fault_subject()
            if self._spared(subject):
                return
            if self._random.decide(point):
                raise InjectedCrash(f"{name} {subject or ''}".strip())
        return hook

    def _after_claim(self, name: str) -> None:
        token = fault_subject()
        aim = self._aimed(token)
        assert token is not None
        if aim is Aim.CRASH_AFTER_CLAIM:
            self._fire(f"aimed {aim}")
            raise InjectedCrash(token)
        if aim is Aim.CANCEL_RUNNING:
            self._fire(f"aimed {aim}")
            job_id = token.rpartition(":")[0]
            with self._lock:
                self._cancelled_running.add(job_id)
            threading.Thread(target=self._cancel, args=(job_id, 0.1), daemon=True).start()
            return
        if aim is None and not self._spared(token) and self._random.decide(name):
            raise InjectedCrash(token)

    def _heartbeat(self, name: str) -> None:
        aim = self._aimed(fault_subject())
        if aim in (Aim.ZOMBIE, Aim.REAPER_RACE):
            raise InjectedCrash(f"heartbeats of {fault_subject()} stop")  # only the heartbeat thread ends

    def _before_report(self, name: str) -> None:
        token = fault_subject()
        assert token is not None
        job_id = token.rpartition(":")[0]
        aim = self._aimed(token)
        if aim is Aim.CRASH_MID_JOB:
            self._fire(f"aimed {aim}")
            raise InjectedCrash(token)
        if aim is Aim.ZOMBIE:
            self._fire(f"aimed {aim}")
            deadline = time.monotonic() + 20 * self._start.lease_s
            while time.monotonic() < deadline:  # stalled (GC pause, partition) until the job was reclaimed
                job = self.store.get(job_id)
                if job.state is not JobState.RUNNING or job.attempt != 1:
                    with self._lock:
                        self._zombies.add(token)
                    break
                time.sleep(0.05)
            return  # now it reports, late
        if aim is Aim.REAPER_RACE:
            self._fire(f"aimed {aim}")
            found = self._event(self._found_by_reaper, job_id)
            if found.wait(20 * self._start.lease_s):
                with self._lock:
                    self._raced.add(token)
                    head_start = len(self._raced) % 2 == 0  # every other race, the reaper starts first
            else:
                head_start = False
            self._event(self._reporting, job_id).set()  # the reaper goes on as this report starts
            if head_start:
                time.sleep(0.05)
            return
        if aim is Aim.CANCEL_RACE:
            self._fire(f"aimed {aim}")
            with self._lock:
                self._cancelled_running.add(job_id)
            start = threading.Barrier(2)
            threading.Thread(target=self._cancel, args=(job_id, 0.0, start), daemon=True).start()
            start.wait(5)
            return
        if aim is None and not self._spared(token) and self._random.decide(name):
            raise InjectedCrash(token)

    def _reap_transition(self, name: str) -> None:
        job_id = fault_subject() or ""
        if self._aims.get(job_id) is Aim.REAPER_RACE and job_id not in self._reaper_met:
            self._reaper_met.add(job_id)
            self._event(self._found_by_reaper, job_id).set()
            self._event(self._reporting, job_id).wait(5)  # both transitions start together
            return
        if not self._spared(job_id) and self._random.decide(name):
            raise InjectedCrash(f"reaper at {job_id}")

    def _event(self, events: dict[str, threading.Event], key: str) -> threading.Event:
        with self._lock:
            return events.setdefault(key, threading.Event())

    def _cancel(self, job_id: str, delay_s: float, start: threading.Barrier | None = None) -> None:
        if start is not None:
            start.wait(5)
        time.sleep(delay_s)
        cancel_noting(self.store, job_id, self._lock, self._cancel_answers)


def cancel_noting(store: JobStore, job_id: str, lock: threading.Lock,
                  answers: list[tuple[str, str, str]]) -> None:
    """Cancel the job and note the answer (job id, status, the job's state) in `answers` under `lock`; a cancel
    an injected crash ended notes nothing."""
    try:
        outcome = store.cancel(job_id)
    except InjectedCrash:
        return
    with lock:
        answers.append((job_id, outcome.status.value, outcome.job.state.value))


class WorkerSideProcess:
    """A worker side in a child process (`python -m tests.soak.workers`) on the deployment os.environ names:
    `start()`, then `stop()` for its report. Its output goes where this process's goes."""

    def __init__(self, start: Start) -> None:
        self._start = start
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> WorkerSideProcess:
        process = self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.soak.workers"], stdin=subprocess.PIPE, text=True, cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT),
                                                                             os.environ.get("PYTHONPATH")]))})
        assert process.stdin is not None
        process.stdin.write(self._start.to_json() + "\n")
        process.stdin.flush()
        return self

    def stop(self, timeout_s: float = 120.0) -> SideReport:
        """Ask it to stop; its report once it has. Raises when it died or did not stop in time (killed)."""
        process, self._process = self._process, None
        assert process is not None and process.stdin is not None
        try:
            process.stdin.write("stop\n")
            process.stdin.close()
        except BrokenPipeError:
            pass  # it ended already: its exit status tells
        try:
            status = process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise RuntimeError(f"the soak's worker side did not stop within {timeout_s} s (killed)") from None
        report = Path(self._start.report_path)
        if status != 0 or not report.exists():
            raise RuntimeError(f"the soak's worker side ended with status {status} and no report")
        return SideReport.from_json(report.read_text())


def serve(requests: IO[str]) -> int:
    """A worker side as `requests` asks: its Start line, then until the next line (or the end)."""
    start = Start.from_json(requests.readline())
    side = WorkerSide(Deployment.from_environment(), start).start()
    requests.readline()
    report = side.stop()
    Path(start.report_path).write_text(report.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.stdin))
