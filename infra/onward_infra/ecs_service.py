"""A local stand-in for an ECS service stopping its tasks, for drills and tests of `onward worker` on the
local stack: each task is an `onward worker` process given its own ECS agent endpoint for task scale-in
protection ($ECS_AGENT_URI/task-protection/v1/state, PUT and GET as the ECS container agent serves them), and
the service stops tasks as ECS does on a scale-in or a rolling deployment: SIGTERM, never to a protected task
(it waits until the protection is dropped or expires)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

PROTECTION_PATH = "/task-protection/v1/state"
MAX_EXPIRES_IN_MINUTES = 2880


@dataclass
class Protection:
    enabled: bool = False
    expires_at: float = 0.0  # time.monotonic()
    requests: list[dict[str, Any]] = field(default_factory=list)

    def active(self) -> bool:
        return self.enabled and time.monotonic() < self.expires_at


class AgentEndpoint:
    """The task protection endpoints of every task of the service, on 127.0.0.1: `/<task id>` + PROTECTION_PATH."""

    def __init__(self) -> None:
        self.protections: dict[str, Protection] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def protected(self, task_id: str) -> bool:
        with self._lock:
            return self.protections.setdefault(task_id, Protection()).active()

    def answer(self, task_id: str, body: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
        """What the agent answers a PUT (`body`) or a GET (None) for one task."""
        with self._lock:
            protection = self.protections.setdefault(task_id, Protection())
            if body is not None:
                enabled, minutes = body.get("ProtectionEnabled"), body.get("ExpiresInMinutes", 120)
                if not isinstance(enabled, bool) or not isinstance(minutes, int) or not (
                        1 <= minutes <= MAX_EXPIRES_IN_MINUTES):
                    return 400, {"error": {"Code": "InvalidParameterException", "Message": f"bad request: {body}"}}
                protection.requests.append(body)
                protection.enabled, protection.expires_at = enabled, time.monotonic() + minutes * 60
            return 200, {"protection": {"ProtectionEnabled": protection.active(),
                                        "TaskArn": f"arn:aws:ecs:us-east-1:123456789012:task/local/{task_id}"}}


def _handler_for(agent: AgentEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer(None)

        def do_PUT(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"null")
            except ValueError:
                body = "not json"
            self._answer(body if isinstance(body, dict) else {"ProtectionEnabled": None})

        def _answer(self, body: dict[str, Any] | None) -> None:
            task_id, _, path = self.path.lstrip("/").partition("/")
            status, answer = (404, {"error": {"Message": "no such path"}}) if "/" + path != PROTECTION_PATH \
                else agent.answer(task_id, body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@dataclass
class Task:
    task_id: str
    process: subprocess.Popen[str]


class LocalEcsService:
    """Tasks running `command` (an `onward worker` command line) with `environment`, each with its agent URI."""

    def __init__(self, command: Sequence[str], environment: dict[str, str], agent: AgentEndpoint) -> None:
        self._command = list(command)
        self._environment = environment
        self._agent = agent
        self.tasks: list[Task] = []
        self.stopped: list[Task] = []
        self._started = 0

    def start_task(self) -> Task:
        self._started += 1
        task_id = f"task-{self._started}"
        process = subprocess.Popen(self._command, text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   env={**self._environment, "ECS_AGENT_URI": f"{self._agent.url}/{task_id}"})
        assert process.stdout is not None
        # RUNNING once the worker says it runs (its signal handlers are in place from then on), as ECS reports a
        # task once its container started; the rest of its output is read on so that it never blocks.
        banner = process.stdout.readline()
        assert "workers running" in banner, f"{task_id} did not start: {banner!r}"
        threading.Thread(target=process.stdout.read, daemon=True).start()
        task = Task(task_id, process)
        self.tasks.append(task)
        return task

    def scale_in(self, count: int, timeout_s: float) -> list[Task]:
        """Stop `count` tasks, as a lower desired count does: only unprotected ones, waiting for them."""
        chosen: list[Task] = []
        deadline = time.monotonic() + timeout_s
        while len(chosen) < count:
            assert time.monotonic() < deadline, "no task became unprotected to scale in"
            free = [task for task in self.tasks if task not in chosen and not self._agent.protected(task.task_id)]
            chosen += free[:count - len(chosen)]
            if len(chosen) < count:
                time.sleep(0.1)
        for task in chosen:
            self._stop(task, deadline)
        return chosen

    def rolling_deploy(self, timeout_s: float) -> list[Task]:
        """Replace every task (MaximumPercent 200): start the new ones, then stop each old one once it is
        unprotected. The old tasks, in the order they were stopped."""
        old = list(self.tasks)
        for _ in old:
            self.start_task()
        deadline = time.monotonic() + timeout_s
        stopped: list[Task] = []
        while len(stopped) < len(old):
            assert time.monotonic() < deadline, "the deployment waited past its timeout for protected tasks"
            for task in [t for t in old if t not in stopped and not self._agent.protected(t.task_id)]:
                self._stop(task, deadline)
                stopped.append(task)
            time.sleep(0.1)
        return stopped

    def stop_all(self) -> None:
        for task in list(self.tasks):
            if task.process.poll() is None:
                task.process.terminate()
        for task in list(self.tasks):
            try:
                task.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                task.process.kill()

    def _stop(self, task: Task, deadline: float) -> None:
        task.process.terminate()  # SIGTERM, as ECS sends it
        task.process.wait(timeout=max(1.0, deadline - time.monotonic()))
        self.tasks.remove(task)
        self.stopped.append(task)
