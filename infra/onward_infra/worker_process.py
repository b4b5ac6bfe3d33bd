"""The local platform's workers in a process of their own, as the ECS service runs them on AWS: `onward worker
--module M` (onward/cli/main.py), started with this process's environment (the deployment's resources) and
stopped as ECS stops a task, SIGTERM then a graceful drain.

Why: the workers' claims and reports are most of the platform's requests, and in the platform's process
they share one interpreter lock with the gateway, the pollers and the projector's writers; each request
they make waits for that lock on its way out and back (measured with bench/e2e.py: see README "Speed").
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
from typing import IO, Self

READY_LINE = re.compile(r"onward worker: \d+ workers running ")  # what `onward worker` prints once its pool runs
OWN_LINES = "onward worker: "  # how `onward worker` starts the lines it prints itself (not its logs)
START_S = 60.0  # how long start() waits for that line
STOP_GRACE_S = 15.0  # after the stop timeout: for the drain to release what still runs, before a kill


class WorkerProcessFailed(RuntimeError):
    """The worker process ended before it was ready; the message has its last output."""


class WorkerProcess:
    """`onward worker --module <module> --concurrency <concurrency> --lease-s <lease_s>` in a child process.
    Its logs go to this process's stderr (its own lines about starting and stopping are dropped: the platform
    says those); stdout stays the caller's (`bench/peer.py --json` prints its answer there). Use as a
    context manager, or start()/stop()."""

    def __init__(self, module: str, concurrency: int, lease_s: float, stop_timeout_s: float = 5.0) -> None:
        self._command = [sys.executable, "-m", "onward.cli", "worker", "--module", module,
                         "--concurrency", str(concurrency), "--lease-s", str(lease_s),
                         "--stop-timeout", str(stop_timeout_s)]
        self._stop_timeout_s = stop_timeout_s
        self._process: subprocess.Popen[str] | None = None
        self._forwarder: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self) -> Self:
        """Start the process and wait until its pool runs (its first line)."""
        process = self._process = subprocess.Popen(self._command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL, text=True, bufsize=1)
        assert process.stdout is not None
        seen: list[str] = []
        ready = threading.Event()
        running = threading.Event()  # its pool runs (else it ended first)

        def forward(lines: IO[str]) -> None:
            for line in lines:
                if not ready.is_set():
                    seen.append(line)
                    if READY_LINE.match(line):
                        running.set()
                        ready.set()
                    continue
                if not line.startswith(OWN_LINES):
                    sys.stderr.write(line)
                    sys.stderr.flush()
            ready.set()  # the process ended: start() sees it

        self._forwarder = threading.Thread(target=forward, args=(process.stdout,), name="worker-process-output",
                                           daemon=True)
        self._forwarder.start()
        if not ready.wait(START_S) or not running.is_set():
            self.stop()
            raise WorkerProcessFailed("the worker process did not start: " + "".join(seen[-20:]).strip())
        return self

    def stop(self) -> None:
        """SIGTERM (running jobs get the stop timeout to end, then are released), a kill if it hangs."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(self._stop_timeout_s + STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._forwarder is not None:
            self._forwarder.join(5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
