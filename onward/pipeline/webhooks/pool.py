"""A deliverer on threads of this process (what `onward up` runs; on AWS the deliverer function takes the
queue's messages instead): one thread receives messages while a thread is free, `threads` threads send
them (Deliverer.handle, at most its slots per endpoint at once). `wait_s` is SQS's long poll; an empty receive
waits `idle_s` before the next. `onward up` short-polls (wait_s 0): its embedded endpoint answers one request
at a time, so a long poll there would hold every other request of the platform for its length."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from onward.pipeline.webhooks.deliverer import Deliverer, Step
from onward.pipeline.webhooks.queue import DeliveryQueue, Received

logger = logging.getLogger("onward-webhooks")


class DeliveryPool:
    def __init__(self, deliverer: Deliverer, queue: DeliveryQueue, threads: int = 16, wait_s: float = 1.0,
                 idle_s: float = 0.05) -> None:
        self._deliverer = deliverer
        self._queue = queue
        self._threads = threads
        self._wait_s = wait_s
        self._idle_s = idle_s
        self._free = threading.Semaphore(threads)
        self._stop = threading.Event()
        self._receiver: threading.Thread | None = None
        self._senders: ThreadPoolExecutor | None = None
        self.handled: dict[str, int] = {}
        self._lock = threading.Lock()

    def start(self) -> DeliveryPool:
        if self._receiver is not None:
            return self
        self._stop = threading.Event()
        self._senders = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="onward-webhook-send")
        self._receiver = threading.Thread(target=self._receive, name="onward-webhook-receive", daemon=True)
        self._receiver.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        if self._receiver is not None:
            self._receiver.join(timeout=timeout_s)
        if self._senders is not None:
            self._senders.shutdown(wait=True, cancel_futures=True)
        self._receiver = None
        self._senders = None

    def _receive(self) -> None:
        while not self._stop.is_set():
            if not self._free.acquire(timeout=0.2):
                continue
            free = 1
            while free < 10 and self._free.acquire(blocking=False):
                free += 1
            try:
                messages = self._queue.receive(free, self._wait_s)
            except Exception:
                logger.exception("receiving webhook deliveries failed; retrying")
                messages = []
                self._stop.wait(1.0)
            for _ in range(free - len(messages)):
                self._free.release()
            if not messages:
                self._stop.wait(self._idle_s)
            for message in messages:
                assert self._senders is not None
                self._senders.submit(self._send, message)

    def _send(self, message: Received) -> None:
        try:
            step: Step = self._deliverer.handle(message, self._queue)
            with self._lock:
                self.handled[step.handled] = self.handled.get(step.handled, 0) + 1
        except Exception:
            logger.exception("a webhook delivery failed to be handled; its message shows again")
        finally:
            self._free.release()
