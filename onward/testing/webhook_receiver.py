"""A webhook receiver on 127.0.0.1 for tests, benches and the README's tour: it checks each delivery's
Onward-Signature with the secret (onward.domain.webhooks.signature_is_valid), keeps what a receiver should keep
(the newest version per job; a delivery id seen before is a duplicate), and can be told to answer an error or
to hang, as a broken endpoint would.

    with WebhookReceiver(secret="a-secret-of-16+chars") as receiver:
        ...register receiver.url...
        delivery = receiver.wait_for(lambda d: d.body["job_id"] == job_id, timeout_s=30)
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from onward.domain.webhooks import DELIVERY_HEADER, SIGNATURE_HEADER, signature_is_valid


@dataclass(frozen=True)
class Received:
    body: dict[str, Any]
    delivery_id: str
    signature_valid: bool
    duplicate: bool  # a delivery id this receiver saw before
    stale: bool  # a version at or below one already kept for the job (a duplicate or a late one)
    at: float  # time.time() when it arrived
    host: str = ""  # its Host header


class WebhookReceiver:
    def __init__(self, secret: str, path: str = "/hooks", port: int = 0) -> None:
        self.secret = secret
        self.path = path
        self.received: list[Received] = []
        self.answer_status = 204  # what it answers a valid delivery
        self.hang = threading.Event()  # set: every request waits until `release` is set (or the sender gives up)
        self.release = threading.Event()
        self.open_requests = 0
        self.most_open = 0
        self._seen: set[str] = set()
        self._versions: dict[str, int] = {}
        self._lock = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                receiver._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)  # 0: a free port
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="webhook-receiver", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.path}"

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        raw = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        with self._lock:
            self.open_requests += 1
            self.most_open = max(self.most_open, self.open_requests)
        try:
            if self.hang.is_set():
                self.release.wait(60)
                return  # the sender gave up meanwhile, or is released: no answer worth recording
            valid = signature_is_valid(self.secret, request.headers.get(SIGNATURE_HEADER, ""), raw, time.time())
            body = json.loads(raw) if raw else {}
            delivery_id = request.headers.get(DELIVERY_HEADER, "")
            with self._lock:
                job, version = str(body.get("job_id")), int(body.get("version", 0))
                stale = version <= self._versions.get(job, 0)
                self._versions[job] = max(version, self._versions.get(job, 0))
                self.received.append(Received(body, delivery_id, valid, delivery_id in self._seen, stale, time.time(),
                                              request.headers.get("Host", "")))
                self._seen.add(delivery_id)
                self._lock.notify_all()
            status = self.answer_status if valid else 401
            request.send_response(status)
            request.send_header("Content-Length", "0")
            request.end_headers()
        finally:
            with self._lock:
                self.open_requests -= 1

    def wait_for(self, matches: Callable[[Received], bool], timeout_s: float = 30.0) -> Received:
        """The first delivery received that `matches`; TimeoutError when none came within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while True:
                found = next((item for item in self.received if matches(item)), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no matching delivery within {timeout_s} s; received {len(self.received)}")
                self._lock.wait(left)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
