"""The replicator's API over HTTP on 127.0.0.1, for a drill that drives it from another process
(`onward regions` serves it):

    GET  /replication                      -> the counters (Replicator.counts)
    POST /replication  {"action": "partition", "regions": ["us-east-1"], "discard": false}
                       {"action": "heal"}
                       {"action": "lag", "seconds": 0.5, "source": "us-east-1", "destination": null}
                       {"action": "loss", "fraction": 0.01}
                       {"action": "direction", "source": "us-west-2", "destination": "us-east-1", "enabled": false}
                       {"action": "clock_skew", "region": "us-east-1", "seconds": 2.0}
                       {"action": "wait_idle", "timeout_s": 10}
                       -> the counters after it; 400 with {"error": ...} for an action it cannot take
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from onward_infra.replication.replicator import Replicator

PATH = "/replication"


def act(replicator: Replicator, command: dict[str, Any]) -> dict[str, Any]:
    """Take one action of the module's docstring; ValueError (or KeyError, TypeError) for a bad one."""
    action = command.get("action")
    if action == "partition":
        replicator.partition(*command.get("regions", []), discard=bool(command.get("discard", False)))
    elif action == "heal":
        replicator.heal()
    elif action == "lag":
        replicator.set_lag(float(command["seconds"]), command.get("source"), command.get("destination"))
    elif action == "loss":
        replicator.set_loss(float(command["fraction"]), command.get("source"), command.get("destination"))
    elif action == "direction":
        replicator.set_direction(command["source"], command["destination"], bool(command["enabled"]))
    elif action == "clock_skew":
        replicator.set_clock_skew(command["region"], float(command["seconds"]))
    elif action == "wait_idle":
        return {"idle": replicator.wait_idle(float(command.get("timeout_s", 10.0))), **replicator.counts()}
    else:
        raise ValueError(f"unknown action {action!r}")
    return replicator.counts()


class ControlServer:
    """`act` over HTTP on 127.0.0.1:`port` (0: any free port). Use as a context manager or start()/stop()."""

    def __init__(self, replicator: Replicator, port: int = 0) -> None:
        self._replicator = replicator

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != PATH:
                    self._answer(404, {"error": f"only {PATH}"})
                    return
                self._answer(200, replicator.counts())

            def do_POST(self) -> None:
                if self.path != PATH:
                    self._answer(404, {"error": f"only {PATH}"})
                    return
                try:
                    command = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                    self._answer(200, act(replicator, command))
                except (ValueError, KeyError, TypeError, AttributeError) as error:
                    self._answer(400, {"error": f"{type(error).__name__}: {error}"})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                """No access lines: the drill prints what matters."""

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="replication-control", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{PATH}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
