"""The whole platform against any AWS endpoint: worker pool, reaper, scheduler (periodic jobs) and pipeline
heartbeats on a schedule, relay and projector behind the local event-source pollers, and the HTTP API, all in
this process except, with `api_environments`, the API's handler, which then runs in Lambda execution
environments of its own (infra/onward_infra/environments.py), and with `worker_module` the workers, which then run
in a process of their own (infra/onward_infra/worker_process.py).

`onward up` builds one; the browser and end-to-end tests build one too and stop and start single
components (the projector, say) to watch the status page notice the delay.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self

from onward.bootstrap import Deployment
from onward.domain.clock import system_clock
from onward.domain.regions import RegionEpoch
from onward.maintenance.queue_gauges import DEFAULT_EVERY_S as QUEUE_GAUGES_EVERY_S
from onward.maintenance.queue_gauges import QueueGauges
from onward.maintenance.reaper import reap_once
from onward.maintenance.scheduler import MAX_PER_TICK
from onward.operator.due_age import oldest_due_age_s
from onward.pipeline.webhooks.pool import DeliveryPool
from onward.runtime.pool import WorkerPool
from onward.runtime.worker import Registry
from onward_infra.environments import ExecutionEnvironments
from onward_infra.gateway import LocalGateway
from onward_infra.pipeline import LocalPipeline
from onward_infra.worker_process import WorkerProcess

logger = logging.getLogger("onward-platform")

Tick = Callable[[], Any]  # one unit of background work; a truthy answer means "there may be more at once"


class BackgroundLoop:
    """Calls `tick` until stopped: again at once while it reports work, else after `idle_s`. A failing tick
    is logged and retried after `idle_s` (as Lambda retries a failed invocation). Can be stopped and started
    again."""

    def __init__(self, name: str, tick: Tick, idle_s: float) -> None:
        self.name = name
        self._tick = tick
        self._idle_s = idle_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.running:
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(self._stop,), name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
        self._thread = None

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                busy = self._tick()
            except Exception:
                logger.exception("%s failed; retrying", self.name)
                busy = False
            if busy:
                time.sleep(0)
            else:
                stop.wait(self._idle_s)


class AfterFailover:
    """A tick that runs only once the Region's epoch item says a failover made this Region home (epoch > 0, home
    this Region), as on AWS, where `onward failover` enables the fence reconciler's mapping in the new home only
    (created disabled: issue 39's gaps). The item is read at most every `check_every_s` until then, and never
    again after (an epoch only rises; the mapping stays enabled until a redeploy turns it off)."""

    def __init__(self, epoch: Callable[[], int], tick: Tick, check_every_s: float = 5.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._epoch = epoch  # this Region's epoch as home: 0 while it is not home by a failover
        self._tick = tick
        self._check_every_s = check_every_s
        self._monotonic = monotonic
        self._checked_at: float | None = None
        self.enabled = False

    def __call__(self) -> Any:
        if not self.enabled:
            now = self._monotonic()
            if self._checked_at is not None and now - self._checked_at < self._check_every_s:
                return False
            self._checked_at = now
            self.enabled = self._epoch() > 0
            if not self.enabled:
                return False
        return self._tick()


def home_epoch(item: RegionEpoch, region: str | None) -> int:
    """The epoch item's epoch if it names `region` home (the Region failed over to), else 0."""
    return item.epoch if item.home is not None and item.home == region else 0


REAPER_MIN_S = 1.0
REAPER_MAX_S = 10.0


@dataclass(frozen=True)
class PlatformOptions:
    workers: int = 4
    lease_s: float = 3.0
    reaper_interval_s: float | None = None  # None: a quarter of the lease, from 1 s to 10 s (reaper_every_s)
    scheduler_interval_s: float = 2.0  # a due fire is created at most this late (on AWS: the minute rule)
    heartbeat_interval_s: float = 5.0
    poll_idle_s: float = 0.2
    http_port: int = 8000
    # The API handler's Lambda execution environments (infra/onward_infra/environments.py): 0 runs it in this
    # process, one request at a time (what tests that inject state into the handler's process need).
    api_environments: int = 0
    # With a module (one with a `registry`, as `onward worker --module` takes): the `workers` run in a process
    # of their own (infra/onward_infra/worker_process.py), as the ECS service runs them; None: threads of this one.
    worker_module: str | None = None
    webhook_threads: int = 16  # the local webhook deliverer's sending threads (onward.pipeline.webhooks.pool)
    # with OTLP export on: the queue gauges are counted (by tenant and type) at most this often
    queue_gauges_every_s: float = QUEUE_GAUGES_EVERY_S

    @property
    def reaper_every_s(self) -> float:
        """How often the reaper runs: `reaper_interval_s`, else a quarter of the lease (1 s to 10 s). A reaper
        pass reads every lease shard (onward.store.ports.index_shards.LEASE_SHARDS queries): with long leases,
        a pass a second would be most of an idle platform's requests, while a lapsed lease is reaped at most a
        quarter of the lease late."""
        if self.reaper_interval_s is not None:
            return self.reaper_interval_s
        return min(REAPER_MAX_S, max(REAPER_MIN_S, self.lease_s / 4))


class LocalPlatform:
    """Every component of `deployment`, started in dependency order and stopped in reverse. The HTTP API and
    the pollers invoke the same Lambda handlers as on AWS, which take their Deployment from os.environ: the
    caller puts the deployment's environment there first, and passes `Deployment.from_environment()` so that
    handlers and platform share one set of components."""

    def __init__(self, deployment: Deployment, registry: Registry,
                 options: PlatformOptions = PlatformOptions()) -> None:
        self.store = deployment.job_store
        pipeline = LocalPipeline.of(deployment)
        self.pipeline = pipeline  # the relay's and projector's pollers: their positions are written at stop
        emitter = deployment.heartbeat_emitter

        def beat() -> bool:
            emitter.emit()
            return False

        in_process = 0 if options.worker_module else options.workers
        self.workers = WorkerPool(self.store, registry, in_process, options.lease_s)
        self.worker_process = (WorkerProcess(options.worker_module, options.workers, options.lease_s)
                               if options.worker_module and options.workers else None)
        # the queue gauges through OpenTelemetry (`--otlp`), which the reaper's Lambda handler records on AWS
        gauges = QueueGauges(lambda: deployment.backlog_counter,
                             lambda: oldest_due_age_s(deployment.store_reads, system_clock()),
                             options.queue_gauges_every_s)

        def reap() -> int:
            moved = reap_once(self.store)
            gauges.tick()
            return moved

        self.reaper = BackgroundLoop("reaper", reap, options.reaper_every_s)
        scheduler = deployment.scheduler
        # busy (again at once) only while a tick fired a full batch: more schedules may be due
        self.scheduler = BackgroundLoop("scheduler", lambda: len(scheduler.tick().fired) >= MAX_PER_TICK,
                                        options.scheduler_interval_s)
        self.heartbeat = BackgroundLoop("heartbeat", beat, options.heartbeat_interval_s)
        self.relay = BackgroundLoop("relay", pipeline.relay_poller.poll_once, options.poll_idle_s)
        self.projector = BackgroundLoop("projector", pipeline.projector_poller.poll_once, options.poll_idle_s)
        archiver = pipeline.archiver_poller
        self.archiver = (BackgroundLoop("archiver", archiver.poll_once, options.poll_idle_s)
                         if archiver is not None else None)
        # completion webhooks: the matcher's poller, and the deliverer on threads of this process
        self.webhook_matcher = (BackgroundLoop("webhook-matcher", pipeline.webhooks_poller.poll_once,
                                               options.poll_idle_s) if pipeline.webhooks_poller is not None else None)
        self.webhook_deliverer = (DeliveryPool(deployment.webhooks.deliverer, deployment.webhooks.queue,
                                               options.webhook_threads, wait_s=0.0,
                                               idle_s=max(options.poll_idle_s, 0.1))
                                  if pipeline.webhooks_poller is not None else None)
        # the fence reconciler (issue 39): on the jobs table's stream, once this Region's epoch says it failed over
        reconciler = pipeline.reconciler_poller
        self.fence_reconciler = (BackgroundLoop("fence-reconciler", AfterFailover(
            lambda: home_epoch(self.store.region_epoch(), deployment.settings.region), reconciler.poll_once),
            options.poll_idle_s)
            if reconciler is not None else None)
        self.environments = ExecutionEnvironments(options.api_environments) if options.api_environments else None
        self.gateway = LocalGateway(self.environments, port=options.http_port)

    @property
    def url(self) -> str:
        return self.gateway.url

    def start(self) -> Self:
        if self.webhook_deliverer is not None:
            self.webhook_deliverer.start()
        for loop in (self.fence_reconciler, self.webhook_matcher, self.archiver, self.projector, self.relay,
                     self.heartbeat, self.reaper, self.scheduler):
            if loop is not None:
                loop.start()
        self.workers.start()
        if self.worker_process is not None:
            self.worker_process.start()
        if self.environments is not None:
            self.environments.start()
        self.gateway.start()
        return self

    def stop(self) -> None:
        self.gateway.stop()
        if self.environments is not None:
            self.environments.stop()
        self.workers.stop()
        if self.worker_process is not None:
            self.worker_process.stop()
        for loop in (self.scheduler, self.reaper, self.heartbeat, self.relay, self.projector, self.archiver,
                     self.webhook_matcher, self.fence_reconciler):
            if loop is not None:
                loop.stop()
        if self.webhook_deliverer is not None:
            self.webhook_deliverer.stop()
        try:
            self.pipeline.write_positions()  # the pollers' exact positions, once they no longer poll
        except Exception:
            logger.exception("writing the pollers' positions failed; a restart redelivers what follows them")

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
