"""The meter's Kinesis counts per shard (infra/onward_infra/metering.py): each record put is charged to the open
shard whose hash key range holds its hash key, the MD5 of its partition key (or its ExplicitHashKey), with
its data's and partition key's bytes, and billed in 25 KB PUT payload units. The expected shard of each
record is computed here from the ranges ListShards answers; each test's docstring says what a missing or
wrong attribution would show."""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from onward_infra.endpoint import REGION, EmbeddedEndpoint
from onward_infra.metering import Meter, MeterReading

pytestmark = pytest.mark.integration

_streams = itertools.count()


@pytest.fixture(scope="module")
def metered() -> Iterator[tuple[EmbeddedEndpoint, Meter]]:
    """An endpoint of this module's own, metered (the session's has no meter)."""
    meter = Meter(REGION)
    with EmbeddedEndpoint(meter=meter) as running:
        yield running, meter


def new_stream(endpoint: EmbeddedEndpoint, shards: int) -> tuple[Any, str]:
    kinesis = endpoint.client("kinesis")
    name = f"metered-{next(_streams)}"
    kinesis.create_stream(StreamName=name, ShardCount=shards)
    return kinesis, name


def open_shard_of(kinesis: Any, stream: str, hash_key: int) -> str:
    """The open shard whose range holds `hash_key`, from ListShards."""
    for shard in kinesis.list_shards(StreamName=stream)["Shards"]:
        hash_range = shard["HashKeyRange"]
        if "EndingSequenceNumber" in shard["SequenceNumberRange"]:
            continue
        if int(hash_range["StartingHashKey"]) <= hash_key <= int(hash_range["EndingHashKey"]):
            return f"{stream}|{shard['ShardId']}"
    raise AssertionError(f"no open shard holds {hash_key}")


def md5_key(partition_key: str) -> int:
    return int(hashlib.md5(partition_key.encode()).hexdigest(), 16)


def test_each_record_is_charged_to_the_shard_its_partition_key_hashes_to(metered):
    """200 records of distinct keys over 4 shards: the per-shard counts are those of the MD5 ranges, and
    add up to the stream's totals (one stream-wide counter could not name the hottest shard, and a wrong
    hash would put the counts on other shards)."""
    endpoint, meter = metered
    kinesis, stream = new_stream(endpoint, 4)
    keys = [f"job-{n}" for n in range(200)]
    meter.reset()
    for batch in (keys[:150], keys[150:]):
        kinesis.put_records(StreamName=stream, Records=[{"Data": b"x" * 10, "PartitionKey": k} for k in batch])
    reading: MeterReading = meter.reset()
    expected = Counter(open_shard_of(kinesis, stream, md5_key(k)) for k in keys)
    assert reading.kinesis_records_by_shard == expected
    assert len(expected) == 4
    assert reading.kinesis_records == 200
    expected_bytes: Counter[str] = Counter()
    for k in keys:
        expected_bytes[open_shard_of(kinesis, stream, md5_key(k))] += 10 + len(k)
    assert reading.kinesis_bytes_by_shard == expected_bytes
    assert reading.kinesis_bytes == sum(10 + len(k) for k in keys)


def test_an_explicit_hash_key_and_a_split_route_records_as_kinesis_does(metered):
    """PutRecord with an ExplicitHashKey is charged to the shard holding that hash, not the partition key's;
    after a split, records go to the open children, never to the closed parent (moto alone looks shards up
    closed ones included)."""
    endpoint, meter = metered
    kinesis, stream = new_stream(endpoint, 1)
    parent = kinesis.list_shards(StreamName=stream)["Shards"][0]["ShardId"]
    kinesis.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2**127))
    meter.reset()
    kinesis.put_record(StreamName=stream, Data=b"low", PartitionKey="k", ExplicitHashKey="5")
    kinesis.put_record(StreamName=stream, Data=b"high", PartitionKey="k", ExplicitHashKey=str(2**127 + 5))
    reading = meter.reset()
    low, high = open_shard_of(kinesis, stream, 5), open_shard_of(kinesis, stream, 2**127 + 5)
    assert low != high and f"{stream}|{parent}" not in (low, high)
    assert reading.kinesis_records_by_shard == Counter({low: 1, high: 1})
    assert reading.kinesis_bytes_by_shard == Counter({low: 4, high: 5})


def test_payload_units_round_each_record_up_to_25_kb(metered):
    """A 10-byte record is one PUT payload unit and a 30,000-byte one two (25 KB units, each record rounded
    up on its own): billing by bytes put / 25 KB would count 1.2 units for both."""
    endpoint, meter = metered
    kinesis, stream = new_stream(endpoint, 1)
    meter.reset()
    kinesis.put_records(StreamName=stream, Records=[{"Data": b"s" * 9, "PartitionKey": "a"},
                                                    {"Data": b"L" * 29_999, "PartitionKey": "b"}])
    reading = meter.reset()
    assert reading.kinesis_payload_units == 3
    assert reading.kinesis_bytes == 30_010


def test_a_put_to_a_missing_stream_is_counted_on_no_shard_of_a_real_stream(metered):
    """A PutRecords naming no stream that exists fails; its records are kept apart ("<stream>|?") rather than
    charged to some shard, and the meter goes on counting."""
    endpoint, meter = metered
    kinesis = endpoint.client("kinesis")
    meter.reset()
    with pytest.raises(kinesis.exceptions.ResourceNotFoundException):
        kinesis.put_records(StreamName="no-such-stream", Records=[{"Data": b"x", "PartitionKey": "a"}])
    reading = meter.reset()
    assert reading.kinesis_records_by_shard == Counter({"no-such-stream|?": 1})


def test_a_remote_reading_keeps_the_counts_per_shard(metered):
    """MeterReading's JSON (what `onward endpoint --meter` answers) carries the per-shard counters."""
    endpoint, meter = metered
    kinesis, stream = new_stream(endpoint, 2)
    meter.reset()
    kinesis.put_record(StreamName=stream, Data=b"abc", PartitionKey="key")
    reading = meter.reset()
    again = MeterReading.from_json(reading.to_json())
    assert again.kinesis_records_by_shard == reading.kinesis_records_by_shard
    assert again.kinesis_bytes_by_shard == reading.kinesis_bytes_by_shard
    assert again.kinesis_payload_units == 1
