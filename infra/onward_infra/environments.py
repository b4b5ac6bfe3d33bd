"""Lambda execution environments on this machine: processes that each run a Lambda handler one invocation at a
time, as Lambda scales a function out to concurrent environments.

The local gateway (infra/onward_infra/gateway.py) runs the API handler in-thread by default, one invocation at a
time for the whole process (onward/api/app.py explains why: Powertools keeps the current event and the
correlation id in state every thread shares). That serializes every request of the HTTP API, and its work
shares the interpreter lock with the workers and pollers of the same process: a burst of submissions was
the embedded stack's ceiling (about 55 jobs/s, whatever else ran). `ExecutionEnvironments(n)` gives the
gateway n environments instead: separate processes, each with its own module state (no invocation sees
another's), its own interpreter lock, and its own Deployment built from the environment variables it was
started with (as a Lambda function's environment). A request waits for a free environment, as a request to
a function at its concurrency limit is queued.

An environment that dies mid-invocation (killed, or a crash of the interpreter) fails that invocation
(EnvironmentFailed: the gateway answers 500, as API Gateway does when the integration fails) and is
replaced; invocations never move from one environment to another mid-way.

Each environment is a new interpreter (`python -m onward_infra.environments`), not a fork: the platform's
process has threads (workers, pollers) that a fork would copy in the middle of whatever they held, and
multiprocessing's `spawn` would import the parent's main script again. It talks to the platform over a
socket pair (multiprocessing's Connection: pickled events and answers).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Self

from onward_infra.lambda_context import LocalLambdaContext

HandlerPath = str  # "package.module:function"
API_HANDLER: HandlerPath = "onward.api.app:handler"
STOP_S = 10.0  # how long stop() waits for an environment to end before killing it
PARENT_CHECK_S = 1.0  # how often an idle environment checks that the platform's process is still there
WAIT_S = 1.0  # how often a request waiting for a free environment checks that they are not stopped

_READY = "ready"
_ANSWER = "answer"
_ERROR = "error"


class EnvironmentFailed(RuntimeError):
    """The environment running an invocation failed: the handler raised, or the process died."""


class HandlerRaised(EnvironmentFailed):
    """The handler raised (the environment itself serves on)."""


def _load(path: HandlerPath) -> Callable[[dict[str, Any], Any], Any]:
    module, _, name = path.partition(":")
    handler: Callable[[dict[str, Any], Any], Any] = getattr(importlib.import_module(module), name)
    return handler


def _serve(connection: Connection, path: HandlerPath, function_name: str) -> None:
    """An environment's process: load the handler, then answer invocations until told to stop (None), the
    connection closes, or the platform's process is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent stops us
    parent = os.getppid()
    handler = _load(path)
    connection.send((_READY, None))
    while True:
        try:
            # (EOF is not enough to see the platform go: processes it forks, the workers' job processes,
            # hold a copy of its end of the connection)
            if not connection.poll(PARENT_CHECK_S):
                if os.getppid() != parent:
                    return
                continue
            event = connection.recv()
        except (EOFError, OSError):  # the platform closed our connection
            return
        if event is None:
            return
        try:
            answer = handler(event, LocalLambdaContext(function_name))
        except Exception as error:  # noqa: BLE001 - reported to the caller, as Lambda reports a function error
            connection.send((_ERROR, type(error).__name__))  # the class only: a message may quote the event
        else:
            connection.send((_ANSWER, answer))


class _Environment:
    def __init__(self, path: HandlerPath, function_name: str) -> None:
        ours, theirs = socket.socketpair()
        with theirs:
            self.process = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno()), path, function_name],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        self.connection = Connection(ours.detach())

    def await_ready(self) -> None:
        kind, _ = self._receive()
        if kind != _READY:
            raise EnvironmentFailed("the environment did not start")

    def invoke(self, event: dict[str, Any]) -> Any:
        try:
            self.connection.send(event)
        except (OSError, ValueError) as error:
            raise EnvironmentFailed("the environment is gone") from error
        kind, value = self._receive()
        if kind == _ERROR:
            raise HandlerRaised(f"the handler raised {value}")
        return value

    def _receive(self) -> tuple[str, Any]:
        try:
            received: tuple[str, Any] = self.connection.recv()
        except (EOFError, OSError) as error:
            raise EnvironmentFailed("the environment's process died") from error
        return received

    def close(self, timeout_s: float) -> None:
        self.ask_to_stop()
        self.wait(timeout_s)

    def ask_to_stop(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # already gone
            self.connection.send(None)
        self.connection.close()

    def wait(self, timeout_s: float) -> None:
        """Until the process ended; killed when it did not within `timeout_s`."""
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class ExecutionEnvironments:
    """`count` processes running the handler at `path` (API_HANDLER by default); call the instance as the
    handler itself: `environments(event, context)` runs the event in a free environment (the context is
    recreated there, named `function_name`). Use as a context manager, or start()/stop()."""

    def __init__(self, count: int, path: HandlerPath = API_HANDLER, function_name: str = "onward-api") -> None:
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        self.count = count
        self._path = path
        self._function_name = function_name
        self._free: queue.Queue[_Environment] = queue.Queue()
        self._all: list[_Environment] = []
        self._lock = threading.Lock()
        self._stopped = False

    def start(self) -> Self:
        """Start every environment and wait until each has loaded its handler (a cold start per process)."""
        started = [self._new() for _ in range(self.count)]
        for environment in started:
            environment.await_ready()
            self._free.put(environment)
        return self

    def _new(self) -> _Environment:
        environment = _Environment(self._path, self._function_name)
        with self._lock:
            self._all.append(environment)
        return environment

    def __call__(self, event: dict[str, Any], context: Any = None) -> Any:
        """The handler's answer to `event`, from the next free environment; EnvironmentFailed when the handler
        raised or its environment died (which is then replaced)."""
        environment = self._next_free()
        try:
            answer = environment.invoke(event)
        except HandlerRaised:
            self._free.put(environment)
            raise
        except EnvironmentFailed:
            self._replace(environment)
            raise
        self._free.put(environment)
        return answer

    def _next_free(self) -> _Environment:
        while True:
            with self._lock:
                if self._stopped:
                    raise EnvironmentFailed("the environments are stopped")
            try:
                return self._free.get(timeout=WAIT_S)
            except queue.Empty:
                continue

    def _replace(self, dead: _Environment) -> None:
        with self._lock:
            if self._stopped:
                return  # stop() has closed it
            self._all.remove(dead)
        dead.close(STOP_S)
        fresh = self._new()
        try:
            fresh.await_ready()
        except EnvironmentFailed:
            with self._lock:
                self._all.remove(fresh)
            fresh.close(0)
            raise
        self._free.put(fresh)

    @property
    def pids(self) -> list[int]:
        """The processes' ids (tests, and `onward up`'s process listing)."""
        with self._lock:
            return [environment.process.pid for environment in self._all]

    def stop(self) -> None:
        """Close every environment: an invocation under way ends with EnvironmentFailed."""
        with self._lock:
            self._stopped = True
            environments, self._all = self._all, []
        while not self._free.empty():
            self._free.get_nowait()
        for environment in environments:
            environment.ask_to_stop()
        for environment in environments:
            environment.wait(STOP_S)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str]) -> None:
    """`python -m onward_infra.environments FD HANDLER_PATH FUNCTION_NAME`: one environment's process."""
    descriptor, path, function_name = argv
    _serve(Connection(int(descriptor)), path, function_name)


if __name__ == "__main__":
    main(sys.argv[1:])
