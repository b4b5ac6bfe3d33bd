"""Two embedded endpoints as two Regions, and the replicator between them behaving as DynamoDB global tables'
default mode (MREC): item by item, asynchronous, conditions evaluated in the local Region only, last writer
wins per item by commit time (onward_infra/replication/replicator.py cites the documentation).

How each would break without the code:
- without the Region of each endpoint (tap.in_region), both endpoints would serve one moto backend: a write
  in one "Region" would be in the other at once, and no lag, partition or conflict could be shown;
- without the write tap, nothing would be replicated;
- without the lag, a change would arrive at once (its commit-to-apply time under the lag);
- without holding changes during a partition, they would be applied across it, or lost at the heal;
- without last writer wins, the Regions would end on different versions of an item written in both (each
  keeping the other's write, which arrived last), and a late delete or put would resurrect or erase items;
- without tombstones, an older put arriving after a newer delete would bring the item back.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.replication.replicator import Replicator

pytestmark = pytest.mark.integration

# Not moto's default Region: the session's endpoint (us-east-1) shares this process's moto backends.
HOME, STANDBY = "eu-west-1", "eu-central-1"


@pytest.fixture(scope="module")
def regions() -> Iterator[tuple[EmbeddedEndpoint, EmbeddedEndpoint]]:
    with EmbeddedEndpoint(region=HOME) as home, EmbeddedEndpoint(region=STANDBY) as standby:
        yield home, standby


class TwoRegions:
    """One table in both Regions (a global table's replicas share its name) and a replicator between them."""

    def __init__(self, home: EmbeddedEndpoint, standby: EmbeddedEndpoint, **replicator: Any) -> None:
        self.table = f"things-{uuid.uuid4().hex[:8]}"
        self.clients = {HOME: home.client("dynamodb"), STANDBY: standby.client("dynamodb")}
        self.streams = {HOME: home.client("dynamodbstreams"), STANDBY: standby.client("dynamodbstreams")}
        for client in self.clients.values():
            client.create_table(
                TableName=self.table, BillingMode="PAY_PER_REQUEST",
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                      {"AttributeName": "sk", "AttributeType": "S"}],
                StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"})
        self.replicator = Replicator([home, standby], {"things": {HOME: self.table, STANDBY: self.table}},
                                     **replicator).start()

    def put(self, region: str, pk: str, **attributes: str) -> None:
        item = {"pk": {"S": pk}, "sk": {"S": "-"}, **{name: {"S": value} for name, value in attributes.items()}}
        self.clients[region].put_item(TableName=self.table, Item=item)

    def get(self, region: str, pk: str) -> dict[str, str] | None:
        item = self.clients[region].get_item(TableName=self.table, Key=_key(pk), ConsistentRead=True).get("Item")
        return None if item is None else {name: value["S"] for name, value in item.items()}

    def stream_records(self, region: str) -> list[dict[str, Any]]:
        streams = self.streams[region]
        arn = self.clients[region].describe_table(TableName=self.table)["Table"]["LatestStreamArn"]
        records: list[dict[str, Any]] = []
        for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                                  ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            records += streams.get_records(ShardIterator=iterator)["Records"]
        return records

    def close(self) -> None:
        self.replicator.stop()


def _key(pk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": "-"}}


@pytest.fixture
def pair(regions: tuple[EmbeddedEndpoint, EmbeddedEndpoint]) -> Iterator[TwoRegions]:
    two = TwoRegions(*regions, seed=7)
    yield two
    two.close()


def test_every_write_reaches_the_other_region_item_by_item_and_its_stream(pair: TwoRegions) -> None:
    """Puts, updates, deletes, a transaction's actions and a batch's entries are replicated as the items
    then are, and each replicated write is in the destination's stream like a write made there (a global
    table's stream holds every write, wherever it came from): without the tap nothing would arrive."""
    home = pair.clients[HOME]
    pair.put(HOME, "a", v="1")
    home.update_item(TableName=pair.table, Key=_key("a"), UpdateExpression="SET v = :v",
                     ExpressionAttributeValues={":v": {"S": "2"}})
    pair.put(HOME, "gone")
    home.transact_write_items(TransactItems=[
        {"Delete": {"TableName": pair.table, "Key": _key("gone")}},
        {"Put": {"TableName": pair.table, "Item": {**_key("t"), "v": {"S": "tx"}}}},
        {"ConditionCheck": {"TableName": pair.table, "Key": _key("a"), "ConditionExpression": "v = :v",
                            "ExpressionAttributeValues": {":v": {"S": "2"}}}}])
    home.batch_write_item(RequestItems={pair.table: [{"PutRequest": {"Item": {**_key("b1"), "v": {"S": "b"}}}}]})
    assert pair.replicator.wait_idle()

    assert pair.get(STANDBY, "a") == {"pk": "a", "sk": "-", "v": "2"}
    assert pair.get(STANDBY, "gone") is None
    assert pair.get(STANDBY, "t") == {"pk": "t", "sk": "-", "v": "tx"}
    assert pair.get(STANDBY, "b1") == {"pk": "b1", "sk": "-", "v": "b"}
    assert pair.replicator.counts()["replicated"] == 6  # put, update, put, the transaction's two, the batch's one
    standby_events = [record["eventName"] for record in pair.stream_records(STANDBY)]
    assert standby_events.count("INSERT") == 4 and standby_events.count("REMOVE") == 1


def test_a_refused_write_is_not_replicated(pair: TwoRegions) -> None:
    """A failed condition wrote nothing, so nothing is sent (without the status check the item's unchanged
    image would still be replicated, with a new timestamp)."""
    pair.put(HOME, "a", v="1")
    assert pair.replicator.wait_idle()
    with pytest.raises(pair.clients[HOME].exceptions.ConditionalCheckFailedException):
        pair.clients[HOME].put_item(TableName=pair.table, Item={**_key("a"), "v": {"S": "2"}},
                                    ConditionExpression="attribute_not_exists(pk)")
    assert pair.replicator.wait_idle()
    assert pair.replicator.counts()["replicated"] == 1


def test_a_change_is_applied_no_earlier_than_its_lag(pair: TwoRegions) -> None:
    """With a lag, the other Region does not have the write right after it committed, then has it, and the
    commit-to-apply time of every change is at least the lag (without the lag it would arrive at once)."""
    pair.replicator.set_lag(1.5)
    pair.put(HOME, "late", v="1")
    assert pair.get(STANDBY, "late") is None
    assert pair.replicator.counts()["pending"] == 1
    assert pair.replicator.wait_idle()
    assert pair.get(STANDBY, "late") == {"pk": "late", "sk": "-", "v": "1"}
    home_to_standby = pair.replicator.link(HOME, STANDBY).counts()
    assert home_to_standby["latency_max_s"] >= 1.5


def test_a_partition_holds_changes_until_it_heals(pair: TwoRegions) -> None:
    """While partitioned both Regions keep writing and neither sees the other's writes (they are pending);
    at the heal everything that waited is delivered (without holding them they would be lost or crossed)."""
    pair.replicator.partition(HOME)
    pair.put(HOME, "h", v="home")
    pair.put(STANDBY, "s", v="standby")
    assert pair.replicator.wait_idle()  # nothing can be delivered: what waits is on the cut links
    assert pair.get(STANDBY, "h") is None and pair.get(HOME, "s") is None
    assert pair.replicator.counts()["pending"] == 2

    pair.replicator.heal()
    assert pair.replicator.wait_idle()
    assert pair.get(STANDBY, "h") == {"pk": "h", "sk": "-", "v": "home"}
    assert pair.get(HOME, "s") == {"pk": "s", "sk": "-", "v": "standby"}


def test_a_discarding_partition_and_loss_drop_changes_for_good(pair: TwoRegions) -> None:
    """A Region cut off for good loses what it had not sent; a lossy link drops that fraction at random:
    every change is then either replicated or counted dropped, never both, never neither."""
    pair.replicator.partition(HOME, discard=True)
    pair.put(HOME, "lost")
    pair.replicator.heal()
    pair.replicator.set_loss(0.5)
    for number in range(40):
        pair.put(HOME, f"maybe-{number}")
    assert pair.replicator.wait_idle()

    counts = pair.replicator.counts()
    assert pair.get(STANDBY, "lost") is None
    arrived = sum(pair.get(STANDBY, f"maybe-{number}") is not None for number in range(40))
    assert counts["replicated"] == arrived and counts["dropped"] == 1 + (40 - arrived)
    assert 0 < arrived < 40


def test_concurrent_writes_converge_on_the_last_writer_in_both_regions(pair: TwoRegions) -> None:
    """The same item written in both Regions during a partition: after the heal both hold the later write,
    and the earlier one, arriving second where the later was made, is counted superseded. Without last writer
    wins each Region would keep the other's write (the one that arrived last) and they would differ."""
    pair.replicator.partition()
    pair.put(HOME, "job", state="running", worker="home-worker")
    pair.put(STANDBY, "job", state="running", worker="standby-worker")
    pair.replicator.heal()
    assert pair.replicator.wait_idle()

    assert pair.get(HOME, "job") == pair.get(STANDBY, "job") == {
        "pk": "job", "sk": "-", "state": "running", "worker": "standby-worker"}
    assert pair.replicator.counts()["superseded"] == 1
    assert pair.replicator.stamp(HOME, "things", _key("job")) == pair.replicator.stamp(STANDBY, "things", _key("job"))


def test_conditions_are_evaluated_in_the_local_region_only(pair: TwoRegions) -> None:
    """Why the platform cannot trust a condition alone across Regions: during a partition the same
    conditional claim (the lease must be free) succeeds in both Regions, and last writer wins then keeps one
    of them silently. Without local evaluation the second claim would be refused."""
    pair.put(HOME, "job", state="queued")
    assert pair.replicator.wait_idle()
    pair.replicator.partition()
    for region in (HOME, STANDBY):
        pair.clients[region].update_item(
            TableName=pair.table, Key=_key("job"), UpdateExpression="SET #s = :running, worker = :w",
            ConditionExpression="#s = :queued", ExpressionAttributeNames={"#s": "state"},
            ExpressionAttributeValues={":running": {"S": "running"}, ":queued": {"S": "queued"},
                                       ":w": {"S": f"{region}-worker"}})
    pair.replicator.heal()
    assert pair.replicator.wait_idle()
    assert pair.get(HOME, "job") == pair.get(STANDBY, "job")
    assert pair.get(HOME, "job")["worker"] == f"{STANDBY}-worker"  # type: ignore[index]  # the later claim


def test_a_clock_running_ahead_wins_as_timestamps_decide(pair: TwoRegions) -> None:
    """Last writer wins by timestamp: a Region whose clock runs 30 s ahead wins a conflict it wrote first."""
    pair.replicator.set_clock_skew(HOME, 30.0)
    pair.replicator.partition()
    pair.put(HOME, "k", v="home-first")
    pair.put(STANDBY, "k", v="standby-second")
    pair.replicator.heal()
    assert pair.replicator.wait_idle()
    assert pair.get(HOME, "k") == pair.get(STANDBY, "k") == {"pk": "k", "sk": "-", "v": "home-first"}


def test_a_late_older_write_never_resurrects_a_deleted_item(pair: TwoRegions) -> None:
    """A put made in one Region before a delete in the other, delivered after it: the delete's tombstone is
    newer, so the item stays deleted in both (without tombstones it would come back in the deleting Region)."""
    pair.put(STANDBY, "d", v="0")
    assert pair.replicator.wait_idle()
    pair.replicator.partition()
    pair.put(HOME, "d", v="old")
    pair.clients[STANDBY].delete_item(TableName=pair.table, Key=_key("d"))
    pair.replicator.heal()
    assert pair.replicator.wait_idle()
    assert pair.get(HOME, "d") is None and pair.get(STANDBY, "d") is None


def test_a_direction_can_be_turned_off(regions: tuple[EmbeddedEndpoint, EmbeddedEndpoint]) -> None:
    """Only the chosen directions replicate: a standby's writes stay there when only home -> standby is on."""
    two = TwoRegions(*regions, directions=[(HOME, STANDBY)])
    try:
        two.put(HOME, "h")
        two.put(STANDBY, "s")
        assert two.replicator.wait_idle()
        assert two.get(STANDBY, "h") is not None and two.get(HOME, "s") is None
    finally:
        two.close()
