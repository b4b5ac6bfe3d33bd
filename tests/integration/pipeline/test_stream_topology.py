"""DynamoDB Streams on the embedded endpoint shaped as on AWS (infra/onward_infra/moto_fixes/streams.py), and the local
outbox-stream poller (infra/onward_infra/pollers/ OutboxStreamPoller) reading that topology as Lambda's mapping does.

Each test deploys template.yaml's data resources and writes outbox events (job_id / version) straight into
the outbox table. The poller keeps its own position per shard in the stack's checkpoint table, as Lambda's
mapping does, and mostly delivers to a recording handler; the last test runs the real relay handler over
sibling shards read out of order, as Lambda may (its events name no shard, and the relay keeps no position).
"""

from __future__ import annotations

import itertools
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from onward.domain.models import NewJob
from onward.entrypoints import relay as relay_handler
from onward.pipeline.outbox import OutboxReader
from onward.settings import Settings
from onward.store.service import JobStore
from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.moto_fixes.stream_topology import StreamTopology
from onward_infra.pollers import OutboxStreamPoller, ShardBackoff
from onward_infra_tests.stream_stacks import NoRecovery, Outbox, event_item
from tests.integration.pipeline.test_relay import assert_each_job_in_version_order, kinesis_records
from tests.support import ManualClock

pytestmark = pytest.mark.integration

NO_BACKOFF = ShardBackoff(first_s=0.0, max_s=0.0)
LAMBDA_RECORD_KEYS = {"eventID", "eventName", "eventVersion", "eventSource", "awsRegion", "dynamodb",
                      "eventSourceARN"}


# --- helpers --------------------------------------------------------------------------------------------

def identity(record: dict[str, Any]) -> tuple[str, int]:
    keys = record["dynamodb"]["Keys"]
    return keys["job_id"]["S"], int(keys["version"]["N"])


def sequence(record: dict[str, Any]) -> int:
    return int(record["dynamodb"]["SequenceNumber"])


def is_closed(shard: dict[str, Any]) -> bool:
    return "EndingSequenceNumber" in shard["SequenceNumberRange"]


class Recorder:
    """A Lambda handler that records the records it accepts; a record of a job in `refuse` (and everything
    after it in the batch) is reported as the batch's item failure instead, as the relay would."""

    def __init__(self) -> None:
        self.accepted: list[dict[str, Any]] = []
        self.refuse: set[str] = set()
        self.invocations = 0

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.invocations += 1
        for record in event["Records"]:
            if identity(record)[0] in self.refuse:
                return {"batchItemFailures": [{"itemIdentifier": record["dynamodb"]["SequenceNumber"]}]}
            self.accepted.append(record)
        return {"batchItemFailures": []}

    def delivered(self) -> list[tuple[str, int]]:
        return [identity(record) for record in self.accepted]


class SpyStreams:
    """A DynamoDB Streams client that logs, in order, which shard the poller opened an iterator on and
    which shard answered no NextShardIterator (ended)."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self._shard_of: dict[str, str] = {}
        self.log: list[tuple[str, str]] = []

    def get_shard_iterator(self, **request: Any) -> dict[str, Any]:
        answer = self._real.get_shard_iterator(**request)
        self._shard_of[answer["ShardIterator"]] = request["ShardId"]
        self.log.append(("opened", request["ShardId"]))
        return answer

    def get_records(self, **request: Any) -> dict[str, Any]:
        answer = self._real.get_records(**request)
        shard_id = self._shard_of[request["ShardIterator"]]
        if "NextShardIterator" in answer:
            self._shard_of[answer["NextShardIterator"]] = shard_id
        else:
            self.log.append(("ended", shard_id))
        return answer

    def first(self, what: str, shard_id: str) -> int | None:
        return next((i for i, entry in enumerate(self.log) if entry == (what, shard_id)), None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def poller_for(outbox: Outbox, handler: Recorder, streams: Any = None,
               batch_size: int = 5) -> OutboxStreamPoller:
    relay: Any = NoRecovery()
    return OutboxStreamPoller(streams or outbox.streams, outbox.arn, handler, relay, outbox.positions,
                              batch_size=batch_size, backoff=NO_BACKOFF)


def poll_until_idle(poller: OutboxStreamPoller, max_polls: int = 500) -> None:
    for _ in range(max_polls):
        if not poller.poll_once():
            assert not poller.failing_shards
            return
    raise AssertionError("the poller never went idle")


def assert_each_once_in_version_order(delivered: list[tuple[str, int]],
                                      written: list[tuple[str, int]]) -> None:
    assert Counter(delivered) == Counter(written), "every record delivered exactly once"
    versions: dict[str, list[int]] = defaultdict(list)
    for job, version in delivered:
        versions[job].append(version)
    assert all(seen == sorted(seen) for seen in versions.values()), "each job's events in version order"


def lineage_respected(spy: SpyStreams, shards: list[dict[str, Any]]) -> None:
    """No child shard was opened before its parent had ended."""
    for shard in shards:
        if "ParentShardId" not in shard or spy.first("opened", shard["ShardId"]) is None:
            continue
        parent_ended = spy.first("ended", shard["ParentShardId"])
        assert parent_ended is not None and parent_ended < spy.first("opened", shard["ShardId"]), shard


@pytest.fixture(scope="module")
def four_shards() -> Iterator[EmbeddedEndpoint]:
    with EmbeddedEndpoint(stream_shards=4) as running:
        yield running


@pytest.fixture
def outbox(four_shards: EmbeddedEndpoint) -> Outbox:
    return Outbox(four_shards)


@pytest.fixture(scope="module")
def default_endpoint() -> Iterator[EmbeddedEndpoint]:
    """An endpoint with no topology options, as `onward up` starts it (the session's has several shards)."""
    with EmbeddedEndpoint() as running:
        yield running


# --- the default ----------------------------------------------------------------------------------------

def test_the_default_endpoint_has_one_open_shard_that_never_splits(default_endpoint: EmbeddedEndpoint) -> None:
    """An endpoint with no topology options (EmbeddedEndpoint(), as `onward up` runs it; not the session's)
    gives a table's stream exactly one shard, open, without a parent, holding every record in commit order,
    and it does not split over time. Its sequence numbers are AWS-wide decimal strings (at least 21 digits,
    botocore refuses fewer), beyond a 64-bit integer, increasing."""
    assert default_endpoint.stream_topology == StreamTopology(shards=1, split_every_s=None)
    outbox = Outbox(default_endpoint)
    written = [(f"job-{n}", version) for version in (1, 2) for n in range(10)]
    for job, version in written:
        outbox.put(job, version)
    time.sleep(0.05)

    description = outbox.describe()
    assert description["StreamStatus"] == "ENABLED" and "LastEvaluatedShardId" not in description
    (shard,) = description["Shards"]
    assert not is_closed(shard) and "ParentShardId" not in shard
    records, ended = outbox.read(shard["ShardId"])
    assert [identity(record) for record in records] == written and not ended
    numbers = [record["dynamodb"]["SequenceNumber"] for record in records]
    assert all(number.isdigit() and len(number) >= 21 and int(number) > 2**64 for number in numbers)
    assert [int(n) for n in numbers] == sorted(int(n) for n in numbers)
    assert int(shard["SequenceNumberRange"]["StartingSequenceNumber"]) <= int(numbers[0])


# --- N open shards --------------------------------------------------------------------------------------

def test_records_of_many_items_over_four_shards_keep_per_item_order_and_reach_the_poller_once(
        outbox: Outbox) -> None:
    """With stream_shards=4 the stream has four open shards and every shard gets records; all records of a
    partition key (a job's events, and every change of one item) are on one shard, in commit order; and the
    outbox poller hands each INSERT to the handler exactly once, each job's in version order, in Lambda's
    DynamoDB event shape with the stream's ARN and no shard id."""
    written = [(f"job-{n}", version) for version in (1, 2, 3) for n in range(40)]
    for job, version in written:
        outbox.put(job, version)
    for step in range(5):  # one item changed again and again: MODIFY records, in order
        outbox.db.update_item(TableName=outbox.table, Key={"job_id": {"S": "job-0"}, "version": {"N": "1"}},
                              UpdateExpression="SET step = :s",
                              ExpressionAttributeValues={":s": {"N": str(step)}})

    shards = outbox.shards()
    assert len(shards) == 4 and not any(is_closed(s) or "ParentShardId" in s for s in shards)
    by_shard = outbox.by_shard()
    assert all(by_shard.values()), "records spread over every shard"
    shard_of_job: dict[str, set[str]] = defaultdict(set)
    for shard_id, records in by_shard.items():
        for record in records:
            shard_of_job[identity(record)[0]].add(shard_id)
        inserts = [identity(r) for r in records if r["eventName"] == "INSERT"]
        assert inserts == [w for w in written if w in set(inserts)], "commit order within the shard"
    assert all(len(found) == 1 for found in shard_of_job.values()), "one shard per partition key"
    (home,) = shard_of_job["job-0"]
    steps = [r["dynamodb"]["NewImage"]["step"]["N"] for r in by_shard[home] if r["eventName"] == "MODIFY"]
    assert steps == ["0", "1", "2", "3", "4"]

    recorder = Recorder()
    poll_until_idle(poller_for(outbox, recorder, batch_size=7))
    assert_each_once_in_version_order(recorder.delivered(), written)
    assert all(set(r) == LAMBDA_RECORD_KEYS and r["eventSourceARN"] == outbox.arn
               and r["eventName"] == "INSERT" for r in recorder.accepted)


def test_sequence_numbers_increase_across_the_stream_and_interleave_across_sibling_shards(
        outbox: Outbox) -> None:
    """Sequence numbers follow commit order over the whole stream (not per shard), so sibling shards'
    numbers interleave and their ranges overlap, as on AWS (a consumer cannot tell a record's shard from
    its number); consecutive records are not consecutive integers."""
    written = [(f"job-{n}", 1) for n in range(60)]
    for job, version in written:
        outbox.put(job, version)
    placed = [(sequence(record), shard_id, identity(record))
              for shard_id, records in outbox.by_shard().items() for record in records]
    placed.sort()
    assert [found for _, _, found in placed] == written, "ascending sequence numbers = commit order"
    shards_in_order = [shard_id for _, shard_id, _ in placed]
    switches = sum(1 for a, b in itertools.pairwise(shards_in_order) if a != b)
    assert switches > 3 * 4, f"shards interleave ({switches} switches over 60 records)"
    numbers_of: dict[str, list[int]] = defaultdict(list)
    for number, shard_id, _ in placed:
        numbers_of[shard_id].append(number)
    ranges = {shard_id: (min(numbers), max(numbers)) for shard_id, numbers in numbers_of.items()}
    first, second = sorted(ranges.values())[:2]
    assert first[0] < second[0] < first[1], "sibling ranges overlap"
    assert all(b - a > 1 for (a, _, _), (b, _, _) in itertools.pairwise(placed))


def test_iterators_and_get_records_per_shard_as_on_aws(outbox: Outbox) -> None:
    """GetShardIterator: TRIM_HORIZON from the shard's first record, AT_SEQUENCE_NUMBER at a record,
    AFTER_SEQUENCE_NUMBER just after it, LATEST only what comes next; a sequence number that is not one of
    the named shard's records (a sibling's, or one past a record's) is a ValidationException, an unknown
    shard a ResourceNotFoundException. GetRecords honours Limit and keeps answering a NextShardIterator on
    an open shard."""
    for n in range(40):
        outbox.put(f"job-{n}", 1)
    by_shard = outbox.by_shard()
    shard_id, records = max(by_shard.items(), key=lambda item: len(item[1]))
    sibling_id, sibling_records = next((s, r) for s, r in by_shard.items() if s != shard_id and r)
    assert len(records) >= 4

    page = outbox.streams.get_records(ShardIterator=outbox.iterator(shard_id), Limit=2)
    assert page["Records"] == records[:2] and "NextShardIterator" in page
    assert outbox.read(shard_id, limit=3) == (records, False)
    third = records[2]["dynamodb"]["SequenceNumber"]
    assert outbox.read(shard_id, outbox.iterator(shard_id, "AT_SEQUENCE_NUMBER", third))[0] == records[2:]
    assert outbox.read(shard_id, outbox.iterator(shard_id, "AFTER_SEQUENCE_NUMBER", third))[0] == records[3:]

    latest = outbox.iterator(shard_id, "LATEST")
    assert outbox.read(shard_id, latest) == ([], False)
    for n in range(40, 80):
        outbox.put(f"job-{n}", 1)
    newer = outbox.read(shard_id, latest)[0]
    assert newer and newer == outbox.read(shard_id)[0][len(records):]

    for wrong in (sibling_records[0]["dynamodb"]["SequenceNumber"], str(int(third) + 1)):
        for kind in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
            with pytest.raises(ClientError) as refused:
                outbox.iterator(shard_id, kind, wrong)
            assert refused.value.response["Error"]["Code"] == "ValidationException"
    with pytest.raises(ClientError) as missing:
        outbox.iterator("shardId-00000000000000000001-0badc0de")
    assert missing.value.response["Error"]["Code"] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as too_many:
        outbox.streams.get_records(ShardIterator=outbox.iterator(shard_id), Limit=1001)
    assert too_many.value.response["Error"]["Code"] == "ValidationException"
    assert sibling_id != shard_id


def test_a_transaction_emits_one_record_per_changed_item_on_each_items_shard_and_a_failed_one_none(
        outbox: Outbox) -> None:
    """transactions.py's guarantees hold across shards: a committed transaction leaves one record per
    changed item, each on its item's shard (an Update that creates an item: one INSERT with the full image);
    a cancelled transaction and one rolled back while applying leave nothing on any shard, and the stream
    goes on normally after them."""
    def tx(*actions: dict[str, Any]) -> None:
        outbox.db.transact_write_items(TransactItems=list(actions))

    def put(job: str, condition: bool = True) -> dict[str, Any]:
        action: dict[str, Any] = {"TableName": outbox.table, "Item": event_item(job, 1)}
        if condition:
            action["ConditionExpression"] = "attribute_not_exists(job_id)"
        return {"Put": action}

    tx(*(put(f"committed-{n}") for n in range(8)),
       {"Update": {"TableName": outbox.table, "Key": {"job_id": {"S": "created"}, "version": {"N": "1"}},
                   "UpdateExpression": "SET #s = :s", "ExpressionAttributeNames": {"#s": "state"},
                   "ExpressionAttributeValues": {":s": {"S": "queued"}}}})
    with pytest.raises(ClientError) as cancelled:
        tx(*(put(f"cancelled-{n}") for n in range(8)), put("committed-0"))
    assert cancelled.value.response["Error"]["Code"] == "TransactionCanceledException"
    outbox.put("text", 1, txt={"S": "hello"})
    with pytest.raises(ClientError):
        tx(*(put(f"rolled-back-{n}", condition=False) for n in range(8)),
           {"Update": {"TableName": outbox.table, "Key": {"job_id": {"S": "text"}, "version": {"N": "1"}},
                       "UpdateExpression": "SET txt = txt + :n",
                       "ExpressionAttributeValues": {":n": {"N": "1"}}}})
    outbox.put("after", 1)

    by_shard = outbox.by_shard()
    everything = [record for records in by_shard.values() for record in records]
    assert sorted(identity(r)[0] for r in everything) == sorted(
        [f"committed-{n}" for n in range(8)] + ["created", "text", "after"])
    assert all(r["eventName"] == "INSERT" for r in everything)
    created = next(r for r in everything if identity(r)[0] == "created")
    assert created["dynamodb"]["NewImage"]["state"] == {"S": "queued"}
    committed_on = [shard_id for shard_id, records in by_shard.items()
                    if any(identity(r)[0].startswith("committed") for r in records)]
    assert len(committed_on) > 1, "one transaction's records on several shards"
    for records in by_shard.values():
        assert [sequence(r) for r in records] == sorted(sequence(r) for r in records)


# --- splits ---------------------------------------------------------------------------------------------

def test_a_split_mid_stream_closes_the_parents_opens_children_and_the_poller_reads_parents_first(
        outbox: Outbox) -> None:
    """Split every shard while the poller is part way through them: each parent closes with an
    EndingSequenceNumber (its last record's), two children open with ParentShardId set and start after it,
    each taking half of the parent's keys; new records go to the children only; GetRecords past a parent's
    last record answers no NextShardIterator. The poller opens no child before its parent ended, so every
    job's events from before the split reach the handler before those after it; nothing is lost or
    delivered twice."""
    jobs = [f"job-{n}" for n in range(30)]
    written = [(job, version) for version in (1, 2) for job in jobs]
    for job, version in written:
        outbox.put(job, version)
    spy = SpyStreams(outbox.streams)
    recorder = Recorder()
    poller = poller_for(outbox, recorder, spy, batch_size=3)
    for _ in range(2):
        poller.poll_once()
    assert 0 < len(recorder.accepted) < len(written), "part way through the parents"

    before = dict(outbox.by_shard())
    children = outbox.endpoint.split_stream_shards(outbox.table)
    assert set(children) == set(before)
    later = [(job, version) for version in (3, 4) for job in jobs]
    for job, version in later:
        outbox.put(job, version)
    written += later

    shards = {shard["ShardId"]: shard for shard in outbox.shards()}
    assert len(shards) == 12
    for parent_id, pair in children.items():
        parent = shards[parent_id]
        assert is_closed(parent)
        ending = int(parent["SequenceNumberRange"]["EndingSequenceNumber"])
        assert ending == sequence(before[parent_id][-1])
        records, ended = outbox.read(parent_id)
        assert records == before[parent_id] and ended, "the parent keeps its records, takes no new ones"
        parent_jobs = {identity(r)[0] for r in records}
        for child_id in pair:
            child = shards[child_id]
            assert child["ParentShardId"] == parent_id and not is_closed(child)
            assert int(child["SequenceNumberRange"]["StartingSequenceNumber"]) > ending
            child_jobs = {identity(r)[0] for r in outbox.read(child_id)[0]}
            assert child_jobs <= parent_jobs, "a child holds keys of its parent's half only"
        first, second = ({identity(r)[0] for r in outbox.read(c)[0]} for c in pair)
        assert not first & second

    poll_until_idle(poller)
    assert_each_once_in_version_order(recorder.delivered(), written)
    lineage_respected(spy, list(shards.values()))


def test_a_child_is_not_read_while_its_parent_is_held_back_by_a_failing_record(outbox: Outbox) -> None:
    """A parent whose batch keeps failing (the handler reports an item failure on one job) is not drained,
    so its children are not read, while every other shard and its children go on; once the handler takes
    the record, the parent drains and its children follow, each record delivered once, in order."""
    jobs = [f"job-{n}" for n in range(24)]
    for job in jobs:
        outbox.put(job, 1)
    stuck_shard, stuck_records = next((s, r) for s, r in outbox.by_shard().items() if r)
    stuck_job = identity(stuck_records[-1])[0]
    children = outbox.endpoint.split_stream_shards(outbox.table)
    for job in jobs:
        outbox.put(job, 2)

    spy = SpyStreams(outbox.streams)
    recorder = Recorder()
    recorder.refuse = {stuck_job}
    poller = poller_for(outbox, recorder, spy)
    for _ in range(10):
        poller.poll_once()
    assert all(spy.first("opened", child) is None for child in children[stuck_shard])
    others = [child for parent, pair in children.items() if parent != stuck_shard for child in pair]
    assert all(spy.first("opened", child) is not None for child in others)
    assert (stuck_job, 1) not in recorder.delivered()
    assert {job for job, version in recorder.delivered() if version == 2} == {
        job for job in jobs if all(identity(r)[0] != job for r in stuck_records)}

    recorder.refuse = set()
    poll_until_idle(poller)
    assert_each_once_in_version_order(recorder.delivered(), [(job, v) for v in (1, 2) for job in jobs])
    lineage_respected(spy, outbox.shards())


def test_timed_splits_with_split_every_s_keep_every_record_once_and_in_order() -> None:
    """EmbeddedEndpoint(split_every_s=S) splits one open shard (the widest key range) every S seconds
    while records are written and read: shards close and children open with no call from the test, the
    count of splits follows the time elapsed, and the poller, polling all along, delivers every record once
    and each job's in order."""
    with EmbeddedEndpoint(stream_shards=2, split_every_s=0.25) as splitting:
        outbox = Outbox(splitting)
        started = time.monotonic()
        recorder = Recorder()
        spy = SpyStreams(outbox.streams)
        poller = poller_for(outbox, recorder, spy, batch_size=4)
        jobs = [f"job-{n}" for n in range(12)]
        written = []
        for version in range(1, 9):
            for job in jobs:
                outbox.put(job, version)
                written.append((job, version))
            poller.poll_once()
            time.sleep(0.15)
        poll_until_idle(poller)
        elapsed = time.monotonic() - started

        shards = outbox.shards()
        closed = [shard for shard in shards if is_closed(shard)]
        assert 3 <= len(closed) <= elapsed / 0.25 + 1
        assert len(shards) == 2 + 2 * len(closed)
        for parent in closed:
            assert sum(1 for s in shards if s.get("ParentShardId") == parent["ShardId"]) == 2
        assert_each_once_in_version_order(recorder.delivered(), written)
        lineage_respected(spy, shards)


def test_describe_stream_pages_with_limit_exclusive_start_shard_id_and_last_evaluated_shard_id(
        outbox: Outbox) -> None:
    """Past 100 shards (4 shards split four times over: 124), DescribeStream answers at most Limit (default
    and maximum 100) shards, oldest first, with LastEvaluatedShardId while more follow, and
    ExclusiveStartShardId continues after it; Limit 101 is refused. The poller follows the pages: records
    on shards only the second page lists reach the handler."""
    for _ in range(4):
        outbox.endpoint.split_stream_shards(outbox.table)
    first = outbox.describe()
    assert len(first["Shards"]) == 100 and first["LastEvaluatedShardId"] == first["Shards"][-1]["ShardId"]
    second = outbox.describe(ExclusiveStartShardId=first["LastEvaluatedShardId"])
    assert len(second["Shards"]) == 24 and "LastEvaluatedShardId" not in second
    everything = first["Shards"] + second["Shards"]
    assert len({s["ShardId"] for s in everything}) == 124
    assert sum(1 for s in everything if not is_closed(s)) == 64

    paged: list[dict[str, Any]] = []
    request: dict[str, Any] = {"Limit": 7}
    while True:
        page = outbox.describe(**request)
        assert len(page["Shards"]) <= 7
        paged += page["Shards"]
        if "LastEvaluatedShardId" not in page:
            break
        request["ExclusiveStartShardId"] = page["LastEvaluatedShardId"]
    assert paged == everything
    listed = [s["ShardId"] for s in everything]
    assert all(listed.index(s["ParentShardId"]) < listed.index(s["ShardId"]) for s in everything
               if "ParentShardId" in s), "parents listed before their children"
    with pytest.raises(ClientError) as refused:
        outbox.describe(Limit=101)
    assert refused.value.response["Error"]["Code"] == "ValidationException"

    written = [(f"job-{n}", 1) for n in range(150)]
    for job, version in written:
        outbox.put(job, version)
    on_second_page = {s["ShardId"] for s in second["Shards"]}
    assert any(records for shard_id, records in outbox.by_shard().items() if shard_id in on_second_page)
    recorder = Recorder()
    poll_until_idle(poller_for(outbox, recorder, batch_size=100))
    assert_each_once_in_version_order(recorder.delivered(), written)


# --- the relay over sibling shards ----------------------------------------------------------------------

class HiddenShards:
    """A DynamoDB Streams client whose DescribeStream leaves out the shards in `hidden`: the poller does not
    read them, as when Lambda has not got round to those shards yet. Every other call goes to the real one."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.hidden: set[str] = set()

    def describe_stream(self, **request: Any) -> dict[str, Any]:
        answer = self._real.describe_stream(**request)
        description = answer["StreamDescription"]
        shown = [shard for shard in description["Shards"] if shard["ShardId"] not in self.hidden]
        return {**answer, "StreamDescription": {**description, "Shards": shown}}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_later_numbered_child_relayed_before_its_sibling_leaves_no_committed_event_behind(
        outbox: Outbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs are created on four shards and relayed part way, every shard splits, and the jobs are claimed and
    completed on the children. Lambda reads sibling shards independently, in any order, and its events name
    no shard: here one parent's later-numbered child is relayed to its end (by the real relay handler,
    batch after batch) before its lower-numbered sibling is read at all. The siblings' sequence numbers
    interleave, so a relay that skipped records at or before a position of its own (kept for the stream, or
    for a shard it had to guess from sequence ranges) would drop the sibling's records as already published.
    Every committed event reaches Kinesis, each exactly once, each job's in version order."""
    for name, value in outbox.environment.items():  # the handler's deployment: this stack's
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    settings = Settings.from_environment(outbox.environment)
    store = JobStore(settings, client=outbox.db, clock=ManualClock())
    job_ids = [store.create("acme" if n % 2 else "globex", NewJob(type="demo.echo")).job.job_id
               for n in range(32)]
    streams = HiddenShards(outbox.streams)
    relay: Any = NoRecovery()
    poller = OutboxStreamPoller(streams, outbox.arn, relay_handler.handler, relay, outbox.positions,
                                batch_size=5, backoff=NO_BACKOFF)
    poller.poll_once()  # part way through the parents

    children = outbox.endpoint.split_stream_shards(outbox.table)
    for _ in job_ids:
        lease = store.claim("w1", 30)
        assert lease is not None
        store.complete(lease, {"ok": True})
    by_shard = outbox.by_shard()

    def skippable(later: str, lower: str) -> bool:
        """Both hold records, and some of the lower child's are numbered before the later child's last."""
        return bool(by_shard[later]) and any(sequence(r) < sequence(by_shard[later][-1]) for r in by_shard[lower])

    lower, later = next(pair for pair in map(sorted, children.values()) if skippable(pair[1], pair[0]))
    streams.hidden = {lower}
    poll_until_idle(poller)
    published = Counter(record.event_id for record in kinesis_records(outbox.endpoint, settings))
    assert all(published[r["dynamodb"]["NewImage"]["event_id"]["S"]] == 1 for r in by_shard[later])
    assert not any(published[r["dynamodb"]["NewImage"]["event_id"]["S"]] for r in by_shard[lower])

    streams.hidden = set()  # the lower-numbered sibling's batches come last
    poll_until_idle(poller)

    committed = Counter(event.event_id for event in OutboxReader(outbox.db, outbox.table).all())
    assert len(committed) == 3 * len(job_ids)
    records = kinesis_records(outbox.endpoint, settings)
    assert Counter(record.event_id for record in records) == committed, "every committed event, once"
    assert_each_job_in_version_order(records)
