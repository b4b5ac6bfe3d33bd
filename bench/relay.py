"""Relay cost and throughput: the real relay vs a naive one-PutRecord-per-event relay, same events, one run.

    .venv/bin/python -m bench.relay [--json] [--jobs N]

Over real HTTP to an EmbeddedEndpoint with template.yaml's data resources deployed. JobStore commits
create for N jobs (default 1,000), then claim + complete for each: 3N outbox events, read back from the
outbox table's DynamoDB stream in batches of up to 1,000 records (the most one GetRecords returns; the
relay's batch size), untimed.

Then, on the same stream records:
- onward: onward.pipeline.relay.relay.Relay.relay per batch, as onward.entrypoints.relay.handler runs it: skip records
  its checkpoint
  covers, decode the INSERT images, PutRecords (<= 500 records, one event per job per request, so a job's
  events stay in order), advance the checkpoint;
- naive: decode each INSERT image and send it with one PutRecord, into a second stream of the same shape.

Kinesis requests are counted with a botocore `before-call.kinesis.*` hook on each relay's own client.
Targets: <= 3 Kinesis requests per 1,000 events, and onward >= 10x the naive throughput; the exit status
is 1 when either is missed. Throughputs are from a shared machine: compare the ratio, not the values.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")  # the relay logs every batch at INFO

from onward.bootstrap import Deployment
from onward.domain.models import NewJob
from onward.pipeline.outbox import event_from_image
from onward.pipeline.relay.publisher import MAX_RECORDS_PER_REQUEST, encode
from onward.pipeline.relay.relay import StreamRecord
from onward.settings import Settings
from onward.store.service import JobStore
from onward_infra.endpoint import EmbeddedEndpoint

JOBS = 1_000
STREAM_BATCH = 1_000
TARGET_REQUESTS_PER_1000 = 3.0
TARGET_SPEEDUP = 10.0
TENANT = "bench"

Batch = tuple[str, list[StreamRecord]]


@dataclass(frozen=True)
class Measurement:
    relay: str
    events: int
    published: int  # records found in that relay's Kinesis stream afterwards
    seconds: float
    kinesis_requests: int

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds

    @property
    def requests_per_1000_events(self) -> float:
        return 1000 * self.kinesis_requests / self.events


class RequestCounter:
    """Counts the API calls a client makes to one service (botocore's before-call event)."""

    def __init__(self, client: Any, service: str) -> None:
        self.calls: dict[str, int] = {}
        client.meta.events.register(f"before-call.{service}.*", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.calls[model.name] = self.calls.get(model.name, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.calls.values())


def generate(store: JobStore, jobs: int, progress: Callable[[str], None]) -> None:
    """create for every job, then claim + complete for each: 3 outbox events a job."""
    request = NewJob(type="bench.job", params={"note": "x" * 100})
    for n in range(jobs):
        store.create(TENANT, request)
        if (n + 1) % 250 == 0:
            progress(f"created {n + 1:,} jobs")
    for n in range(jobs):
        lease = store.claim("bench-worker", 300)
        if lease is None:
            raise RuntimeError("a created job was not claimable")
        store.complete(lease, {"n": n})
        if (n + 1) % 250 == 0:
            progress(f"completed {n + 1:,} jobs")


def read_batches(streams: Any, arn: str) -> list[Batch]:
    """Every record of the outbox stream, in the batches GetRecords returns (as an event source would)."""
    batches: list[Batch] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator:
            response = streams.get_records(ShardIterator=iterator, Limit=STREAM_BATCH)
            if not response["Records"]:
                break
            batches.append((shard["ShardId"], [
                StreamRecord(r["dynamodb"]["SequenceNumber"], r["eventName"], r["dynamodb"].get("NewImage"),
                             int(r["dynamodb"]["ApproximateCreationDateTime"].timestamp() * 1000))
                for r in response["Records"]]))
            iterator = response.get("NextShardIterator")
    return batches


def fewest_ordered_requests(batches: list[Batch]) -> int:
    """The fewest PutRecords any relay needs that never has two events of one job in flight at once:
    per batch, one round per event of its busiest job, each round in requests of <= 500 records."""
    total = 0
    for _, records in batches:
        depth: dict[str, int] = {}
        rounds: dict[int, int] = {}
        for record in records:
            if record.event_name != "INSERT" or record.new_image is None:
                continue
            job = record.new_image["job_id"]["S"]
            depth[job] = depth.get(job, 0) + 1
            rounds[depth[job]] = rounds.get(depth[job], 0) + 1
        total += sum(math.ceil(size / MAX_RECORDS_PER_REQUEST) for size in rounds.values())
    return total


def stream_size(kinesis: Any, stream: str) -> int:
    count = 0
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while True:
            response = kinesis.get_records(ShardIterator=iterator, Limit=10_000)
            if not response["Records"]:
                break
            count += len(response["Records"])
            iterator = response["NextShardIterator"]
    return count


def measure_onward(endpoint: EmbeddedEndpoint, settings: Settings, batches: list[Batch],
                   events: int) -> Measurement:
    kinesis, dynamodb = endpoint.client("kinesis"), endpoint.client("dynamodb")
    relay = Deployment(settings, clients={"kinesis": kinesis, "dynamodb": dynamodb}).relay
    # Warm both clients first (a client's first call loads its model and opens its connection): the naive
    # relay's client is warmed by its create_stream, and a cold start timed on one side only decided the ratio
    # at small sizes.
    kinesis.describe_stream_summary(StreamName=settings.require("events_stream"))
    dynamodb.describe_table(TableName=settings.require("checkpoint_table"))
    counter = RequestCounter(kinesis, "kinesis")
    start = time.perf_counter()
    for _, records in batches:
        outcome = relay.relay(records)
        if outcome.first_unpublished is not None:
            raise RuntimeError(f"the relay stopped at {outcome.first_unpublished}: {outcome.error_codes}")
    seconds, requests = time.perf_counter() - start, counter.total
    published = stream_size(kinesis, settings.require("events_stream"))
    return Measurement("onward", events, published, seconds, requests)


def measure_naive(endpoint: EmbeddedEndpoint, batches: list[Batch], events: int, shards: int) -> Measurement:
    kinesis = endpoint.client("kinesis")
    stream = f"naive-events-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(StreamName=stream, ShardCount=shards)
    kinesis.get_waiter("stream_exists").wait(StreamName=stream, WaiterConfig={"Delay": 0.1})
    counter = RequestCounter(kinesis, "kinesis")
    start = time.perf_counter()
    for _, records in batches:
        for record in records:
            if record.event_name != "INSERT" or record.new_image is None:
                continue
            event = event_from_image(record.new_image)
            kinesis.put_record(StreamName=stream, Data=encode(event), PartitionKey=event.job_id)
    seconds, requests = time.perf_counter() - start, counter.total
    return Measurement("naive", events, stream_size(kinesis, stream), seconds, requests)


def run(endpoint: EmbeddedEndpoint | None = None, *, jobs: int = JOBS,
        progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    own = endpoint is None
    running = EmbeddedEndpoint().start() if endpoint is None else endpoint
    try:
        environment = running.deploy(f"bench-relay-{uuid.uuid4().hex[:8]}").environment
        os.environ.update(environment)  # as Lambda gives the handlers their resources
        os.environ["POWERTOOLS_METRICS_DISABLED"] = "true"
        settings = Settings.from_environment(environment)
        dynamodb = running.client("dynamodb")
        generate(JobStore(settings, client=dynamodb), jobs, progress)
        arn = dynamodb.describe_table(TableName=settings.require("outbox_table"))["Table"]["LatestStreamArn"]
        batches = read_batches(running.client("dynamodbstreams"), arn)
        events = sum(1 for _, records in batches for r in records if r.event_name == "INSERT")
        events_stream = settings.require("events_stream")
        shards = len(running.client("kinesis").list_shards(StreamName=events_stream)["Shards"])
        progress(f"relaying {events:,} events in {len(batches)} batches")
        onward = measure_onward(running, settings, batches, events)
        progress("relaying them again, one PutRecord each")
        naive = measure_naive(running, batches, events, shards)
    finally:
        if own:
            running.stop()
    results: dict[str, Any] = {
        "jobs": jobs,
        "events": events,
        "batches": len(batches),
        "batch_size": STREAM_BATCH,
        "fewest_ordered_requests": fewest_ordered_requests(batches),
    }
    for m in (onward, naive):
        results[m.relay] = {**asdict(m), "events_per_s": round(m.events_per_s, 1),
                            "requests_per_1000_events": round(m.requests_per_1000_events, 3)}
    results["speedup"] = round(onward.events_per_s / naive.events_per_s, 2)
    results["targets"] = {"requests_per_1000_events": TARGET_REQUESTS_PER_1000, "speedup": TARGET_SPEEDUP}
    results["complete"] = onward.published == naive.published == events
    results["ok"] = (results["complete"] and onward.requests_per_1000_events <= TARGET_REQUESTS_PER_1000
                     and results["speedup"] >= TARGET_SPEEDUP)
    return results


def report(results: dict[str, Any]) -> str:
    def verdict(ok: bool) -> str:
        return "OK" if ok else "MISSED"

    lines = [
        f"Relay: outbox stream -> Kinesis, {results['events']:,} events of {results['jobs']:,} jobs "
        f"({results['batches']} stream batches of <= {results['batch_size']:,} records), one run:",
        "",
        f"{'relay':<30}{'Kinesis requests':>18}{'per 1,000 events':>18}{'published':>11}{'seconds':>10}"
        f"{'events/s':>11}",
    ]
    for name, label in (("onward", "onward (PutRecords, ordered)"), ("naive", "naive (PutRecord per event)")):
        r = results[name]
        lines.append(f"{label:<30}{r['kinesis_requests']:>18,}{r['requests_per_1000_events']:>18,.1f}"
                     f"{r['published']:>11,}{r['seconds']:>10.2f}{r['events_per_s']:>11,.0f}")
    onward, targets = results["onward"], results["targets"]
    lines += [
        "",
        f"Kinesis requests per 1,000 events: {onward['requests_per_1000_events']:.1f} "
        f"(target <= {targets['requests_per_1000_events']:g}): "
        f"{verdict(onward['requests_per_1000_events'] <= targets['requests_per_1000_events'])}",
        f"throughput onward / naive: {results['speedup']:.1f}x (target >= {targets['speedup']:g}x): "
        f"{verdict(results['speedup'] >= targets['speedup'])}",
        f"every event in both streams: {verdict(results['complete'])}",
        f"(fewest requests that keep each job's events in order: {results['fewest_ordered_requests']}; "
        "onward's time includes its checkpoint read and write per batch)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--jobs", type=int, default=JOBS,
                        help=f"jobs to run through, 3 events each (default {JOBS:,})")
    args = parser.parse_args(argv)
    results = run(jobs=args.jobs, progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(json.dumps(results, sort_keys=True) if args.json else report(results))
    return 0 if results["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
