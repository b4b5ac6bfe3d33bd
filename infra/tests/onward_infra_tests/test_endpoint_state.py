"""The embedded endpoint's state kept in a data directory (`onward endpoint --data-dir`,
infra/onward_infra/snapshots.py),
checked from outside on child processes (a restore replaces moto's state in its process, so never in the
test process, whose session endpoint shares it).

How each would break without the code:
- without restoring, a restarted endpoint would deploy a fresh stack (other table names) with nothing in it;
- without the sequence counters in the snapshot, records written after a restart could reuse sequence
  numbers that pollers' checkpoints already passed, and be skipped;
- without the final snapshot at a graceful stop, the writes since the last periodic one would be lost;
- without the directory lock, two endpoints would overwrite each other's snapshots;
- without the format check, a snapshot of another moto version could load as a silently broken state.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from onward_infra.endpoint import STATE_PATH, EndpointProcess
from onward_infra.snapshots import FORMAT, SNAPSHOT_FILE

pytestmark = pytest.mark.integration


def _client(environment: dict[str, str], service: str) -> Any:
    return boto3.client(service, endpoint_url=environment["AWS_ENDPOINT_URL"],
                        region_name=environment["AWS_DEFAULT_REGION"], aws_access_key_id="testing",
                        aws_secret_access_key="testing")


def _state(endpoint: EndpointProcess) -> dict[str, Any]:
    with urllib.request.urlopen(endpoint.url + STATE_PATH, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def _put_outbox_event(environment: dict[str, str], job_id: str) -> None:
    _client(environment, "dynamodb").put_item(TableName=environment["OUTBOX_TABLE"], Item={
        "job_id": {"S": job_id}, "version": {"N": "1"}, "payload": {"S": "x" * 50}})


def _outbox(environment: dict[str, str]) -> list[dict[str, Any]]:
    items = _client(environment, "dynamodb").scan(TableName=environment["OUTBOX_TABLE"])["Items"]
    return sorted(items, key=lambda item: item["job_id"]["S"])


def _stream_records(environment: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """Every shard of the outbox table's stream -> (sequence number, job id) of each record, from its start."""
    dynamodb, streams = _client(environment, "dynamodb"), _client(environment, "dynamodbstreams")
    arn = dynamodb.describe_table(TableName=environment["OUTBOX_TABLE"])["Table"]["LatestStreamArn"]
    found: dict[str, list[tuple[str, str]]] = {}
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records = streams.get_records(ShardIterator=iterator, Limit=1000)["Records"]
        found[shard["ShardId"]] = [(record["dynamodb"]["SequenceNumber"], record["dynamodb"]["Keys"]["job_id"]["S"])
                                   for record in records]
    return found


def _kinesis_records(environment: dict[str, str]) -> dict[str, list[tuple[str, bytes]]]:
    kinesis, stream = _client(environment, "kinesis"), environment["EVENTS_STREAM"]
    found: dict[str, list[tuple[str, bytes]]] = {}
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        iterator = kinesis.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        found[shard["ShardId"]] = [(record["SequenceNumber"], record["Data"])
                                   for record in kinesis.get_records(ShardIterator=iterator)["Records"]]
    return found


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[EndpointProcess]:
    with EndpointProcess("--data-dir", str(tmp_path / "state"), "--stream-shards", "2") as process:
        yield process


def test_a_restart_resumes_tables_streams_and_kinesis_exactly_where_they_were(endpoint: EndpointProcess) -> None:
    environment = endpoint.environment
    assert _state(endpoint)["restored"] is False
    for number in range(20):
        _put_outbox_event(environment, f"job-{number:02}")
    kinesis = _client(environment, "kinesis")
    for number in range(10):
        kinesis.put_record(StreamName=environment["EVENTS_STREAM"], Data=f"event {number}".encode(),
                           PartitionKey=f"job-{number}")
    before = (_outbox(environment), _stream_records(environment), _kinesis_records(environment))
    assert sum(len(records) for records in before[1].values()) == 20
    assert sum(len(records) for records in before[2].values()) == 10

    endpoint.restart()

    assert endpoint.environment == environment  # the same stack, not a fresh deployment
    assert _state(endpoint)["restored"] is True
    assert (_outbox(environment), _stream_records(environment), _kinesis_records(environment)) == before
    # what is written after the restart comes after what was there, in every shard it lands on
    for number in range(20, 30):
        _put_outbox_event(environment, f"job-{number:02}")
    kinesis.put_record(StreamName=environment["EVENTS_STREAM"], Data=b"after", PartitionKey="job-0")
    for shard, records in _stream_records(environment).items():
        old = before[1][shard]
        assert records[:len(old)] == old
        assert all(int(sequence) > int(old[-1][0]) for sequence, _ in records[len(old):]) if old else True
    for shard, records in _kinesis_records(environment).items():
        old = before[2][shard]
        assert records[:len(old)] == old
        assert all(int(sequence) > int(old[-1][0]) for sequence, _ in records[len(old):]) if old else True


def _crash(endpoint: EndpointProcess) -> None:
    os.kill(endpoint.pid, signal.SIGKILL)
    time.sleep(0.5)


def test_a_crash_loses_only_the_writes_after_the_last_snapshot_and_a_graceful_stop_none(tmp_path: Path) -> None:
    """With snapshots an hour apart, what a crash loses is visible: everything since the last snapshot (here
    the one the graceful restart took), and nothing that a graceful stop saw."""
    with EndpointProcess("--data-dir", str(tmp_path / "state"), "--snapshot-every-s", "3600") as endpoint:
        environment = endpoint.environment
        endpoint.restart()  # a graceful stop: its final snapshot holds the deployed stack
        _put_outbox_event(environment, "written-then-crashed")
        _crash(endpoint)
        endpoint.start()
        assert endpoint.environment == environment
        assert _outbox(environment) == []  # written after the last snapshot: lost, as the README says
        _put_outbox_event(environment, "written-then-stopped")
        endpoint.restart()
        assert [item["job_id"]["S"] for item in _outbox(environment)] == ["written-then-stopped"]


def test_periodic_snapshots_keep_what_was_written_before_a_crash(tmp_path: Path) -> None:
    with EndpointProcess("--data-dir", str(tmp_path / "state"), "--snapshot-every-s", "0.2") as endpoint:
        environment = endpoint.environment
        _put_outbox_event(environment, "written-before-a-snapshot")
        written = _state(endpoint)["snapshots"]["changes"]  # the count of changes, the write included
        deadline = time.monotonic() + 30
        while _state(endpoint)["snapshots"]["changes_saved"] < written:
            assert time.monotonic() < deadline, "no snapshot within 30 s"
            time.sleep(0.1)
        _crash(endpoint)
        endpoint.start()
        assert endpoint.environment == environment
        assert [item["job_id"]["S"] for item in _outbox(environment)] == ["written-before-a-snapshot"]


def _endpoint_command(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "onward.cli", "endpoint", "--port", "0", "--data-dir", str(data_dir)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_data_directory_in_use_or_from_another_version_is_refused_with_the_reason(tmp_path: Path) -> None:
    data_dir = tmp_path / "state"
    with EndpointProcess("--data-dir", str(data_dir)):
        refused = _endpoint_command(data_dir)
        assert refused.returncode == 2
        assert "is in use by another embedded endpoint" in refused.stderr
    snapshot = data_dir / SNAPSHOT_FILE
    snapshot.write_bytes(b"onward-embedded-endpoint-state/0 moto/0.0\n" + snapshot.read_bytes().partition(b"\n")[2])
    refused = _endpoint_command(data_dir)
    assert refused.returncode == 2
    assert "was written as 'onward-embedded-endpoint-state/0 moto/0.0'" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_state_of_the_previous_format_is_refused_with_the_reason(tmp_path: Path) -> None:
    """A state saved as format /3 (no `by_tag` index, no webhook queues) by this very moto version: its stack
    would answer tag listings and webhooks with errors, so the endpoint refuses it (exit status 2, the header
    it found and the one it reads, what to do) instead of serving it. Without the format's version in the
    header (or with it left at /3 when the layout changed) the endpoint would start on it: this command would
    not end, and its timeout fails the test."""
    data_dir = tmp_path / "state"
    with EndpointProcess("--data-dir", str(data_dir)):
        pass  # its graceful stop saves a state of the current format: a body a /3 endpoint could have written
    current = FORMAT.decode()
    assert current.startswith("onward-embedded-endpoint-state/4 moto/")
    previous = current.replace("onward-embedded-endpoint-state/4 ", "onward-embedded-endpoint-state/3 ", 1)
    snapshot = data_dir / SNAPSHOT_FILE
    snapshot.write_bytes(previous.encode() + b"\n" + snapshot.read_bytes().partition(b"\n")[2])

    refused = _endpoint_command(data_dir)

    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert (f"onward endpoint: --data-dir: {snapshot} was written as {previous!r}; this endpoint reads "
            f"{current!r} only (start with another --data-dir, or delete it to start empty)\n") in refused.stderr
    assert "Traceback" not in refused.stderr and refused.stdout == ""


def test_an_endpoint_started_with_sigint_ignored_still_stops_on_it_with_its_snapshot(tmp_path: Path) -> None:
    """A shell starts a background job with SIGINT ignored, and its children inherit that: EndpointProcess.stop
    (SIGINT, as Ctrl-C) then waited its whole timeout and killed the endpoint, its last snapshot lost. Breaks
    without `onward endpoint` restoring Python's own SIGINT handler."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        endpoint = EndpointProcess("--data-dir", str(tmp_path / "state"), "--snapshot-every-s", "3600").start()
    finally:
        signal.signal(signal.SIGINT, previous)
    started = time.monotonic()
    assert endpoint.stop(timeout_s=30.0), "killed after the timeout: SIGINT was ignored"
    assert time.monotonic() - started < 30
    assert (tmp_path / "state" / SNAPSHOT_FILE).exists()
