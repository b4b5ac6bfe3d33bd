"""A throttling drill for the relay's publisher that runs against any Kinesis endpoint: the embedded one
(moto) in-process, and kinesis-local (npm) in a private network namespace (`python -m
tests.integration.kinesis_drill --endpoint URL` prints its outcome as JSON).

Faults are injected at the client boundary with botocore event hooks, never by patching our code:
- whole calls refused: `before-send.kinesis.PutRecords` answers HTTP 400 ProvisionedThroughputExceededException
  (botocore's standard retry mode, onward.settings, retries it with backoff);
- some entries of a call refused: the entries are dropped before sending and their answers carry ErrorCode
  ProvisionedThroughputExceededException, as Kinesis answers a partially failed PutRecords (the
  publisher retries only those entries, with its own backoff, and holds each job's later events back).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from botocore.awsrequest import AWSResponse

from onward.domain.models import OutboxEvent
from onward.domain.states import JobState
from onward.pipeline.relay.publisher import KinesisPublisher
from onward.settings import Settings
from tests.support import PartialFailures

THROTTLED = "ProvisionedThroughputExceededException"
TENANT = "acme"


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Any:
        yield self._data


def error_response(url: str, code: str, message: str, *, status: int = 400,
                   json_version: str = "1.1", extra: dict[str, Any] | None = None) -> AWSResponse:
    """An AWS JSON-protocol error answer, as the service sends it (botocore parses and retries it)."""
    body = json.dumps({"__type": code, "message": message, **(extra or {})}).encode()
    headers = {"content-type": f"application/x-amz-json-{json_version}", "x-amzn-requestid": "drill",
               "content-length": str(len(body))}
    return AWSResponse(url, status, headers, _Body(body))


class RefusedCalls:
    """The first `times` sends of `operation` on `client` are answered with `answer(request)` instead of
    reaching the endpoint; counts every send and the RetryAttempts botocore reports per call."""

    def __init__(self, client: Any, service: str, operation: str, times: int,
                 answer: Callable[[Any], AWSResponse]) -> None:
        self.times = times
        self.sends = 0
        self.refused = 0
        self.retry_attempts: list[int] = []
        self._answer = answer
        client.meta.events.register(f"before-send.{service}.{operation}", self._send)
        client.meta.events.register(f"after-call.{service}.{operation}", self._after)

    def _send(self, request: Any, **_: Any) -> AWSResponse | None:
        self.sends += 1
        if self.refused < self.times:
            self.refused += 1
            return self._answer(request)
        return None

    def _after(self, parsed: dict[str, Any], **_: Any) -> None:
        self.retry_attempts.append(parsed.get("ResponseMetadata", {}).get("RetryAttempts", 0))


@dataclass(frozen=True)
class DrillOutcome:
    published: int
    events: int
    sends: int
    refused_calls: int
    retry_attempts: list[int]
    entry_calls: int
    retried_entries: int
    error_codes: dict[str, int]
    publisher_sleeps: list[float]
    copies_per_event: dict[str, int]
    versions_per_job: dict[str, list[int]]  # first deliveries, in shard order
    shards_per_job: dict[str, int]
    sequence_digits: int  # length of the longest sequence number seen (moto: small; AWS: 56 digits)


def drill_events(jobs: int = 6, versions: int = 3) -> list[OutboxEvent]:
    """`versions` events of each of `jobs` jobs, in commit order (v1 of every job, then v2, ...)."""
    states = [JobState.QUEUED, JobState.RUNNING, JobState.SUCCEEDED]
    return [OutboxEvent(event_id=f"{job:032x}:{version}", job_id=f"{job:032x}", tenant_id=TENANT,
                        type="demo.echo", version=version, status=states[min(version - 1, 2)],
                        attempt=min(version - 1, 1), occurred_at=f"2026-11-30T10:00:{version:02d}.{job:03d}Z")
            for version in range(1, versions + 1) for job in range(1, jobs + 1)]


def read_stream(kinesis: Any, stream: str) -> list[tuple[str, int, dict[str, Any]]]:
    """Every record of the stream: (shard, sequence number as an integer, payload), in shard order."""
    found: list[tuple[str, int, dict[str, Any]]] = []
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        for _ in range(100):
            response = kinesis.get_records(ShardIterator=iterator, Limit=10_000)
            found += [(shard["ShardId"], int(r["SequenceNumber"]), json.loads(r["Data"])) for r in response["Records"]]
            if not response["Records"] or not response.get("NextShardIterator"):
                break
            iterator = response["NextShardIterator"]
    return sorted(found, key=lambda r: (r[0], r[1]))


def run_drill(kinesis: Any, stream: str, *, refused_calls: int = 2,
              entry_plan: list[dict[int, str]] | None = None) -> DrillOutcome:
    """Publish drill_events() through KinesisPublisher while calls and entries are refused; read back."""
    events = drill_events()
    calls = RefusedCalls(kinesis, "kinesis", "PutRecords", refused_calls,
                         lambda request: error_response(request.url, THROTTLED, "Rate exceeded for stream"))
    entries = PartialFailures(kinesis, entry_plan if entry_plan is not None
                             else [{0: THROTTLED, 2: THROTTLED, 4: THROTTLED}, {1: THROTTLED}])
    sleeps: list[float] = []
    publisher = KinesisPublisher(kinesis, stream, sleep=sleeps.append)
    published = publisher.publish(events)
    records = read_stream(kinesis, stream)
    copies: dict[str, int] = {}
    versions: dict[str, list[int]] = {}
    shards: dict[str, set[str]] = {}
    for shard, _, payload in records:
        copies[payload["event_id"]] = copies.get(payload["event_id"], 0) + 1
        shards.setdefault(payload["job_id"], set()).add(shard)
        if payload["version"] not in versions.setdefault(payload["job_id"], []):
            versions[payload["job_id"]].append(payload["version"])
    return DrillOutcome(
        published=sum(published), events=len(events), sends=calls.sends, refused_calls=calls.refused,
        retry_attempts=calls.retry_attempts, entry_calls=entries.calls,
        retried_entries=publisher.stats.retried_entries, error_codes=dict(publisher.stats.error_codes),
        publisher_sleeps=sleeps, copies_per_event=copies, versions_per_job=versions,
        shards_per_job={job: len(s) for job, s in shards.items()},
        sequence_digits=max((len(str(sequence)) for _, sequence, _ in records), default=0),
    )


def create_stream(kinesis: Any, stream: str, shards: int = 2) -> None:
    kinesis.create_stream(StreamName=stream, ShardCount=shards)
    for _ in range(200):
        if kinesis.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE":
            return
        time.sleep(0.05)
    raise TimeoutError(f"stream {stream} never became ACTIVE")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Kinesis throttling drill against one endpoint (JSON out).")
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--stream", default=f"drill-{int(time.time() * 1000)}")  # unique: never re-created
    args = parser.parse_args(argv)
    settings = Settings(endpoint_url=args.endpoint, region="us-east-1")
    kinesis = settings.client("kinesis")  # the production client configuration (standard retries)
    create_stream(kinesis, args.stream)
    print(json.dumps(asdict(run_drill(kinesis, args.stream))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
