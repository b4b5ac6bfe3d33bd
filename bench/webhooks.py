"""Completion webhooks on the local stack: deliveries per second, and each delivery's lag (the event's commit ->
the receiver got it) beside the projector's lag (the same commit -> the status view) in the same run.

    .venv/bin/python -m bench.webhooks [--jobs 300] [--tenants 4] [--workers 4] [--burst] [--json]

An embedded endpoint, the whole local platform (`onward up`'s components: workers, relay, projector, the webhook
matcher's own poller on the events stream, the deliverer's threads on the stack's SQS queue), one signed
receiver per tenant on 127.0.0.1 (onward.testing.webhook_receiver), each tenant's endpoint registered for
"succeeded". `--jobs` demo.echo jobs are created through the JobStore, round-robin over the tenants, as fast as it
goes; the bench waits until every job's succeeded event reached its receiver. For each job: the webhook's lag is
its arrival at the receiver less the event's commit time (the status view's committed_at: DynamoDB's commit, as
the relay stamps it), the projector's is the view's projected_at less the same commit time. Every delivery's
signature is checked; `bad_signatures` and `missing` must be 0 (the exit status is 1 otherwise). Wall times move
with the machine's load: compare the two lags of one run, not runs of different days.

Requests per delivery, counted in this process (botocore's before-call event on the deployment's SQS client, and
the webhook store's reads of a tenant's endpoints): `queue_sends_per_delivery` (SendMessage and SendMessageBatch
requests), `endpoint_reads_per_delivery` (the matcher's Queries of a tenant's endpoints, pages apart) and
`sqs_requests_per_delivery` (every SQS request: sends, receives, deletes, visibility changes; the local
deliverer short-polls, so its idle receives count too). Each delivery also reads its record and its endpoint and
writes its outcome (three DynamoDB requests), which the bench does not count.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from onward.bootstrap import Deployment
from onward.domain.clock import epoch_ms
from onward.domain.models import NewJob
from onward.domain.webhooks import Webhook
from onward.runtime.demo_jobs import registry
from onward.testing.webhook_receiver import WebhookReceiver
from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.platform import LocalPlatform, PlatformOptions

SECRET = "bench-webhook-secret-0123"


@dataclass
class Report:
    jobs: int
    tenants: int
    delivered: int
    missing: int
    bad_signatures: int
    duplicates: int
    wall_s: float
    deliveries_per_s: float
    webhook_lag_p50_ms: float
    webhook_lag_p95_ms: float
    webhook_lag_max_ms: float
    recorded_lag_p50_ms: float  # commit -> the matcher recorded the delivery (the rest is queue and send)
    projector_lag_p50_ms: float
    projector_lag_p95_ms: float
    projector_lag_max_ms: float
    queue_sends_per_delivery: float
    endpoint_reads_per_delivery: float
    sqs_requests_per_delivery: float
    sqs_requests: dict[str, int]


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


def run(jobs: int, tenants: int, workers: int, timeout_s: float = 600.0, burst: bool = False) -> Report:
    """With `burst`, the matcher is stopped while the jobs run and started once all succeeded: it then reads
    the events in full batches (as after an outage, or under load), and the lags include that wait."""
    with ExitStack() as stack:
        endpoint = stack.enter_context(EmbeddedEndpoint())
        deployed = endpoint.deploy().environment | {
            "POWERTOOLS_METRICS_DISABLED": "true", "ONWARD_PARAMETER_VALIDATION": "false",
            "ONWARD_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32", "ONWARD_HEARTBEAT_INTERVAL_S": "1",
            "ONWARD_TOKENS": "bench=bench-token", "POWERTOOLS_LOG_LEVEL": "WARNING",
            "ONWARD_JOB_TYPES": ",".join(sorted(registry.types))}
        stack.enter_context(environment(deployed))
        deployment = Deployment.from_environment()
        names = [f"tenant-{index}" for index in range(tenants)]
        receivers = {name: stack.enter_context(WebhookReceiver(SECRET)) for name in names}
        for index, name in enumerate(names):
            deployment.webhooks.store.register(Webhook(
                webhook_id=f"wh_{index:024x}", tenant_id=name, url=receivers[name].url, kinds=("succeeded",),
                secret=SECRET, created_at=int(time.time() * 1000)))
        sqs_requests: Counter[str] = Counter()
        deployment.client("sqs").meta.events.register(
            "before-call.sqs.*", lambda model, **_: sqs_requests.update([model.name]))
        endpoint_reads = Counter[str]()
        store = deployment.webhooks.store
        read_endpoints = store.of_tenant

        def counted_reads(tenant_id: str) -> list[Webhook]:
            endpoint_reads.update([tenant_id])
            return read_endpoints(tenant_id)

        store.of_tenant = counted_reads  # type: ignore[method-assign]
        options = PlatformOptions(workers=workers, lease_s=10.0, heartbeat_interval_s=1.0, poll_idle_s=0.05,
                                  http_port=0)
        platform = stack.enter_context(LocalPlatform(deployment, registry, options))
        if burst and platform.webhook_matcher is not None:
            platform.webhook_matcher.stop()
        started = time.time()
        created: dict[str, str] = {}
        for number in range(jobs):
            tenant = names[number % tenants]
            job = deployment.job_store.create(tenant, NewJob(type="demo.echo", params={"n": number}))
            created[job.job.job_id] = tenant
        if burst and platform.webhook_matcher is not None:
            # every job's events on the stream before the matcher reads any: its batches are full
            hold_until = time.monotonic() + timeout_s
            while time.monotonic() < hold_until:
                views = deployment.status_view.get_many(list(created))
                if sum(view.status.value == "succeeded" for view in views.values()) == jobs:
                    break
                time.sleep(0.2)
            platform.webhook_matcher.start()
        deadline = time.monotonic() + timeout_s
        arrived: dict[str, float] = {}
        while time.monotonic() < deadline and len(arrived) < jobs:
            for receiver in receivers.values():
                for item in list(receiver.received):
                    arrived.setdefault(str(item.body.get("job_id")), item.at)
            time.sleep(0.1)
        wall_s = (max(arrived.values()) if arrived else time.time()) - started
        views = deployment.status_view.get_many(list(created))
        webhook_lags, projector_lags = [], []
        for job_id, at in arrived.items():
            view = views.get(job_id)
            if view is None or view.committed_at is None:
                continue
            committed = epoch_ms(view.committed_at)
            webhook_lags.append(at * 1000 - committed)
            projector_lags.append(epoch_ms(view.projected_at) - committed)
        recorded = {d.job_id: d.created_at for index in range(tenants)
                    for d in deployment.webhooks.store.recent(f"wh_{index:024x}", limit=jobs)}
        recorded_lags = [recorded[job_id] - epoch_ms(view.committed_at) for job_id, view in views.items()
                         if job_id in recorded and view.committed_at is not None]
        everything = [item for receiver in receivers.values() for item in receiver.received]
        delivered = max(1, len(arrived))
        sends = sqs_requests["SendMessage"] + sqs_requests["SendMessageBatch"]
        return Report(
            jobs=jobs, tenants=tenants, delivered=len(arrived), missing=jobs - len(arrived),
            bad_signatures=sum(not item.signature_valid for item in everything),
            duplicates=sum(item.duplicate for item in everything), wall_s=round(wall_s, 2),
            deliveries_per_s=round(len(arrived) / wall_s, 1) if wall_s > 0 else 0.0,
            webhook_lag_p50_ms=round(statistics.median(webhook_lags), 1) if webhook_lags else float("nan"),
            webhook_lag_p95_ms=round(percentile(webhook_lags, 0.95), 1),
            webhook_lag_max_ms=round(max(webhook_lags, default=float("nan")), 1),
            recorded_lag_p50_ms=round(statistics.median(recorded_lags), 1) if recorded_lags else float("nan"),
            projector_lag_p50_ms=round(statistics.median(projector_lags), 1) if projector_lags else float("nan"),
            projector_lag_p95_ms=round(percentile(projector_lags, 0.95), 1),
            projector_lag_max_ms=round(max(projector_lags, default=float("nan")), 1),
            queue_sends_per_delivery=round(sends / delivered, 3),
            endpoint_reads_per_delivery=round(endpoint_reads.total() / delivered, 3),
            sqs_requests_per_delivery=round(sqs_requests.total() / delivered, 3), sqs_requests=dict(sqs_requests))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.webhooks", description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--tenants", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--burst", action="store_true",
                        help="hold the matcher until every job succeeded: full stream batches (the lags then "
                             "include the hold)")
    args = parser.parse_args(argv)
    report = run(args.jobs, args.tenants, args.workers, burst=args.burst)
    values: dict[str, Any] = asdict(report)
    if args.json:
        print(json.dumps(values))
    else:
        width = max(map(len, values))
        for name, value in values.items():
            print(f"{name:<{width}}  {value}")
    return 1 if report.missing or report.bad_signatures else 0


if __name__ == "__main__":
    sys.exit(main())
