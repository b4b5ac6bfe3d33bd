"""The meter's attribution of read and write units to partitions (infra/onward_infra/metering.py): every unit a request
would be billed on AWS is charged to "<table>|<partition key value>" or "<table>.<index>|<index partition
key value>" ("<table>|*scan*" for a Scan page), so a bench can name the hottest key.

Each test creates a table of its own (partition key pk, sort key sk; a KEYS_ONLY global secondary index
by_owner on owner, sk) on an endpoint with a Meter, and checks charges computed here by hand from the
developer guide's sizes: an attribute costs its name's and its string value's UTF-8 bytes; a write one unit
per started KB (two in a transaction); a read one per started 4 KB (half eventually consistent; a Query's
examined items added up before rounding). Each test's docstring says what a missing attribution would show.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from onward.domain.clock import ManualClock
from onward.domain.models import NewJob
from onward.settings import Settings
from onward.store.ports import Tenant
from onward.store.service import JobStore
from onward_infra.endpoint import REGION, EmbeddedEndpoint, client_for
from onward_infra.metering import OBSERVER_AGENT, Meter, MeterReading, RemoteMeter

pytestmark = pytest.mark.integration

_tables = itertools.count()
INDEX = "by_owner"
ECHO = NewJob(type="demo.echo", params={"n": 1})


@pytest.fixture(scope="module")
def metered() -> Iterator[tuple[EmbeddedEndpoint, Meter]]:
    """An endpoint of this module's own, metered (the session's has no meter)."""
    meter = Meter(REGION)
    with EmbeddedEndpoint(meter=meter) as running:
        yield running, meter


class HotTable:
    """A fresh table with the by_owner index on the metered endpoint, a client of it, and its meter."""

    def __init__(self, endpoint: EmbeddedEndpoint, meter: Meter) -> None:
        self.name = f"hot-key-{next(_tables)}"
        self.endpoint = endpoint
        self.meter = meter
        self.db = endpoint.client("dynamodb")
        self.db.create_table(
            TableName=self.name, BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": name, "AttributeType": "S"} for name in ("pk", "sk", "owner")],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            GlobalSecondaryIndexes=[{
                "IndexName": INDEX, "Projection": {"ProjectionType": "KEYS_ONLY"},
                "KeySchema": [{"AttributeName": "owner", "KeyType": "HASH"},
                              {"AttributeName": "sk", "KeyType": "RANGE"}]}])

    def key(self, partition: str, index: bool = False) -> str:
        return f"{self.name}.{INDEX}|{partition}" if index else f"{self.name}|{partition}"

    def put(self, pk: str, sk: str, **attributes: str) -> None:
        self.db.put_item(TableName=self.name, Item=item(pk, sk, **attributes))

    def measure(self) -> None:
        """Count from now on only."""
        self.meter.reset()

    def reading(self) -> MeterReading:
        return self.meter.reset()


@pytest.fixture
def table(metered: tuple[EmbeddedEndpoint, Meter]) -> HotTable:
    return HotTable(*metered)


def item(pk: str, sk: str, **attributes: str) -> dict[str, Any]:
    return {name: {"S": value} for name, value in {"pk": pk, "sk": sk, **attributes}.items()}


def key(pk: str, sk: str) -> dict[str, Any]:
    return item(pk, sk)


# --- writes ---------------------------------------------------------------------------------------------------

def test_writes_are_charged_to_their_table_and_index_partitions(table: HotTable) -> None:
    """Writes to partitions A and B, each unit charged to the partition it was spent on; the totals are the
    sum of the charges. Sizes (bytes): A/1 with a 1500-byte blob = pk 3 + sk 3 + owner 10 ("alice") + blob
    1504 = 1520; its index entry (KEYS_ONLY: pk, sk, owner) 16. Without the attribution every key is missing;
    charging an index write to the table's partition would show A and B above their totals here and no
    by_owner keys; charging a moved index entry to its new partition only would leave bob at 1."""
    db, name = table.db, table.name
    table.measure()
    table.put("A", "1", owner="alice", blob="x" * 1500)  # A: 2 (1520 B); alice: 1 (entry 16 B)
    db.transact_write_items(TransactItems=[{"Put": {"TableName": name, "Item": item("B", "1", owner="bob")}}])
    # B: 2 (transactional, 14 B); bob: 1
    db.update_item(TableName=name, Key=key("A", "1"), UpdateExpression="SET #b = :b",
                   ExpressionAttributeNames={"#b": "blob"}, ExpressionAttributeValues={":b": {"S": "y" * 100}})
    # A: 2 (the larger of 1520 and 120 B); index: 0 (KEYS_ONLY entry unchanged)
    db.update_item(TableName=name, Key=key("B", "1"), UpdateExpression="SET #o = :o",
                   ExpressionAttributeNames={"#o": "owner"}, ExpressionAttributeValues={":o": {"S": "carol"}})
    # B: 1 (16 B); bob: 1 (entry removed), carol: 1 (entry added)
    with pytest.raises(ClientError, match="ConditionalCheckFailed"):
        db.put_item(TableName=name, Item=item("A", "1"), ConditionExpression="attribute_not_exists(pk)")
    # A: 1 (a failed conditional write is billed: the item's 120 B)
    db.transact_write_items(TransactItems=[
        {"ConditionCheck": {"TableName": name, "Key": key("B", "1"), "ConditionExpression": "attribute_exists(pk)"}},
        {"Put": {"TableName": name, "Item": item("B", "2")}}])  # B: 2 (check) + 2 (put, 6 B, no owner: no entry)
    db.batch_write_item(RequestItems={name: [{"PutRequest": {"Item": item("A", "2")}},  # A: 1
                                             {"DeleteRequest": {"Key": key("B", "2")}}]})  # B: 1
    db.delete_item(TableName=name, Key=key("A", "1"))  # A: 1 (120 B); alice: 1 (entry removed)

    reading = table.reading()
    assert dict(reading.write_units_by_key) == {
        table.key("A"): 2 + 2 + 1 + 1 + 1,
        table.key("B"): 2 + 1 + 2 + 2 + 1,
        table.key("alice", index=True): 1 + 1,
        table.key("bob", index=True): 1 + 1,
        table.key("carol", index=True): 1,
    }
    assert (reading.table_write_units, reading.index_write_units) == (15, 5)
    assert sum(reading.write_units.values()) == sum(reading.write_units_by_key.values()) == 20
    assert reading.failed_conditional_writes == 1
    assert reading.hottest("write") == (table.key("B"), 8.0)
    assert reading.hottest("write", exclude=lambda k: k == table.key("B")) == (table.key("A"), 7.0)
    assert reading.hottest("write", exclude=lambda k: f".{INDEX}|" not in k) == (table.key("alice", index=True), 2.0)
    assert reading.read_units == 0 and not reading.read_units_by_key


def test_a_tables_write_units_are_also_counted_by_the_items_sort_key(table: HotTable) -> None:
    """Items of two kinds in one partition (sort keys ROW and RUN#1, as a job's row and run record): each
    table write counted under its item's sort key, index writes not, so the counts add up to the table's
    units. Without it a bench could not tell apart what one partition's units paid for."""
    table.measure()
    table.put("A", "ROW", owner="alice", blob="x" * 1500)  # A|ROW: 2; alice: 1 (the index: not by sort key)
    table.db.transact_write_items(TransactItems=[  # A|ROW: 4 (the larger image, 1.5 KB, twice) + RUN#1: 2
        {"Update": {"TableName": table.name, "Key": key("A", "ROW"), "UpdateExpression": "REMOVE #b",
                    "ExpressionAttributeNames": {"#b": "blob"}}},
        {"Put": {"TableName": table.name, "Item": item("A", "RUN#1")}}])
    table.put("B", "ROW")  # B|ROW: 1
    reading = table.reading()
    assert dict(reading.write_units_by_sort_key) == {f"{table.name}|ROW": 2 + 4 + 1, f"{table.name}|RUN#1": 2}
    assert sum(reading.write_units_by_sort_key.values()) == reading.table_write_units == 9


def test_an_update_of_an_unprojected_attribute_costs_the_keys_only_index_nothing(table: HotTable) -> None:
    """With a KEYS_ONLY index, an update of an attribute outside the index leaves its entry as it was: the
    table's partition pays, the index's nothing (as on AWS). An update that writes the same owner again is
    no change either. Charging the index on every write would show a by_owner key here."""
    table.put("A", "1", owner="alice", note="a")
    table.measure()
    for note in ("b", "c"):
        table.db.update_item(TableName=table.name, Key=key("A", "1"), UpdateExpression="SET #n = :n, #o = :o",
                             ExpressionAttributeNames={"#n": "note", "#o": "owner"},
                             ExpressionAttributeValues={":n": {"S": note}, ":o": {"S": "alice"}})
    reading = table.reading()
    assert dict(reading.write_units_by_key) == {table.key("A"): 2}
    assert reading.index_write_units == 0


# --- reads ----------------------------------------------------------------------------------------------------

def ten_items_of_1000_bytes(table: HotTable, pk: str = "Q") -> None:
    """sk "00".."09", each 1000 B: pk 3 + sk 4 + owner 10 ("quinn") + blob 4 + 979."""
    for n in range(10):
        table.put(pk, f"{n:02}", owner="quinn", blob="z" * 979)


def query(table: HotTable, pk: str, **request: Any) -> dict[str, Any]:
    answer: dict[str, Any] = table.db.query(
        TableName=table.name, KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": pk}, **request.pop("values", {})}, **request)
    return answer


def test_a_query_is_charged_once_for_the_items_it_examined_to_its_partition(table: HotTable) -> None:
    """10 items of 1000 B in one partition: one page examines 10,000 B, rounded up to 3 blocks of 4 KB once
    (not per item: that would be 10 blocks), 0.5 each eventually consistent: 1.5; consistent: 3. A filter
    that keeps one item, or a projection, reads the same 10,000 B: 1.5 again (charging what the answer holds
    would give 0.5). A Limit of 4 examines 4,000 B: 0.5. An empty partition costs the minimum, 0.5."""
    ten_items_of_1000_bytes(table)
    table.put("R", "00", blob="r")
    table.measure()
    assert query(table, "Q")["Count"] == 10
    first = table.reading()
    assert dict(first.read_units_by_key) == {table.key("Q"): 1.5}
    assert first.read_units == 1.5

    assert query(table, "Q", ConsistentRead=True)["Count"] == 10
    filtered = query(table, "Q", FilterExpression="sk = :one", values={":one": {"S": "03"}})
    assert (filtered["Count"], filtered["ScannedCount"]) == (1, 10)
    assert query(table, "Q", ProjectionExpression="sk")["Count"] == 10
    assert query(table, "Q", Limit=4)["Count"] == 4
    assert query(table, "nobody")["Count"] == 0
    reading = table.reading()
    assert dict(reading.read_units_by_key) == {table.key("Q"): 3 + 1.5 + 1.5 + 0.5, table.key("nobody"): 0.5}
    assert reading.read_units == 7.0
    assert reading.hottest("read") == (table.key("Q"), 6.5)


def test_a_query_of_the_index_is_charged_to_the_index_partition_by_its_projected_entries(table: HotTable) -> None:
    """The same 10 items queried through by_owner: each KEYS_ONLY entry is 17 B (pk 3 + sk 4 + owner 10), 170 B
    in all: 0.5, charged to the index's partition "quinn", nothing to the table's. Sizing by the whole items
    (10,000 B) would give 1.5; charging the table's partition would show "Q"."""
    ten_items_of_1000_bytes(table)
    table.measure()
    answer = table.db.query(TableName=table.name, IndexName=INDEX, KeyConditionExpression="#o = :o",
                            ExpressionAttributeNames={"#o": "owner"}, ExpressionAttributeValues={":o": {"S": "quinn"}})
    assert answer["Count"] == 10
    reading = table.reading()
    assert dict(reading.read_units_by_key) == {table.key("quinn", index=True): 0.5}


def test_item_reads_cost_each_item_by_its_4_kb_blocks(table: HotTable) -> None:
    """A 5 KB item (pk 3 + sk 3 + blob 4 + 5110 = 5120 B): 2 blocks of 4 KB. A consistent GetItem: 2, even
    projected to one attribute (the whole item is read); eventually consistent: 1; an absent item the
    minimum, 1 consistent. BatchGetItem, eventually consistent: 1 for the item + 0.5 for an absent one.
    TransactGetItems: 2 per block: 4. All on partition G; another partition's read on its own key."""
    table.put("G", "1", blob="g" * 5110)
    table.put("H", "1")
    table.measure()
    db, name = table.db, table.name
    assert "Item" in db.get_item(TableName=name, Key=key("G", "1"), ConsistentRead=True)
    only_once = table.reading()
    assert dict(only_once.read_units_by_key) == {table.key("G"): 2.0}

    db.get_item(TableName=name, Key=key("G", "1"), ConsistentRead=True, ProjectionExpression="pk")  # 2
    db.get_item(TableName=name, Key=key("G", "1"))  # 1
    assert "Item" not in db.get_item(TableName=name, Key=key("G", "absent"), ConsistentRead=True)  # 1
    db.batch_get_item(RequestItems={name: {"Keys": [key("G", "1"), key("G", "absent")]}})  # 1 + 0.5
    db.transact_get_items(TransactItems=[{"Get": {"TableName": name, "Key": key("G", "1")}}])  # 4
    db.get_item(TableName=name, Key=key("H", "1"))  # 0.5
    reading = table.reading()
    assert dict(reading.read_units_by_key) == {table.key("G"): 2 + 1 + 1 + 1.5 + 4, table.key("H"): 0.5}
    assert reading.hottest("read") == (table.key("G"), 9.5)
    assert reading.hottest("read", exclude=lambda k: k.endswith("|G")) == (table.key("H"), 0.5)


def test_a_scan_is_charged_to_the_tables_scan_key_by_the_items_it_examined(table: HotTable) -> None:
    """A Scan page over the 10 items of 1000 B and a 1,000-byte item elsewhere examines 11,000 B: 3 blocks,
    1.5 eventually consistent, charged to "<table>|*scan*", whatever its filter keeps; with a Limit of 2,
    2,000 B: 0.5."""
    ten_items_of_1000_bytes(table)
    table.put("S", "00", owner="quinn", blob="z" * 979)
    table.measure()
    answer = table.db.scan(TableName=table.name, FilterExpression="pk = :s",
                           ExpressionAttributeValues={":s": {"S": "S"}})
    assert (answer["Count"], answer["ScannedCount"]) == (1, 11)
    assert table.db.scan(TableName=table.name, Limit=2)["Count"] == 2
    reading = table.reading()
    assert dict(reading.read_units_by_key) == {table.key("*scan*"): 1.5 + 0.5}


def test_an_observers_reads_are_not_counted(table: HotTable) -> None:
    """A benchmark's own polling (User-Agent with OBSERVER_AGENT) costs the job nothing, reads included."""
    ten_items_of_1000_bytes(table)
    observer = client_for(table.endpoint.url, "dynamodb", Config(user_agent_extra=OBSERVER_AGENT))
    table.measure()
    observer.get_item(TableName=table.name, Key=key("Q", "00"))
    observer.query(TableName=table.name, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "Q"}})
    reading = table.reading()
    assert reading.read_units == 0 and not reading.read_units_by_key and not reading.requests


def test_a_reading_crosses_the_endpoints_meter_path_whole(table: HotTable) -> None:
    """The reading as RemoteMeter gets it (POST /_onward/meter, JSON) is the meter's own: reads and writes by
    key, read units in halves, and its hottest keys. A field left out of the JSON would come back empty."""
    ten_items_of_1000_bytes(table)
    table.measure()
    query(table, "Q")
    table.db.get_item(TableName=table.name, Key=key("Q", "00"))
    table.put("Q", "10", owner="quinn")
    expected_reads = {table.key("Q"): 1.5 + 0.5}
    expected_writes = {table.key("Q"): 1, table.key("quinn", index=True): 1}

    reading = RemoteMeter(table.endpoint.url).reset()

    assert dict(reading.read_units_by_key) == expected_reads and reading.read_units == 2.0
    assert dict(reading.write_units_by_key) == expected_writes
    assert dict(reading.write_units_by_sort_key) == {f"{table.name}|10": 1}
    assert reading.hottest("read") == (table.key("Q"), 2.0)
    assert MeterReading.from_json(json.loads(json.dumps(reading.to_json()))) == reading
    assert table.reading() == MeterReading(), "the meter path reset the meter"


# --- the platform's own requests ---------------------------------------------------------------------------

def test_a_jobs_units_are_all_attributed_to_partitions_of_the_stacks_tables(
        metered: tuple[EmbeddedEndpoint, Meter]) -> None:
    """One job created and read back through the store on a stack of template.yaml: every read and write
    unit counted lands on a key naming one of the stack's tables (or one of its indexes), and the keys add
    up to the totals; the hottest write key is a partition of the jobs table or its indexes."""
    endpoint, meter = metered
    stack = f"hot-key-stack-{next(_tables)}"
    environment = endpoint.deploy(stack).environment
    settings = Settings.from_environment(environment)
    store = JobStore(settings, client=endpoint.client("dynamodb"), clock=ManualClock())
    store.register_tenant(Tenant("acme"))
    meter.reset()
    created = store.create("acme", ECHO, idempotency_key="order-1")
    assert store.get(created.job.job_id) == created.job
    reading = meter.reset()

    tables = {value for value in environment.values() if value.startswith(f"{stack}-")}  # the stack's resources
    owners = {key.partition("|")[0].split(".")[0] for key in (*reading.read_units_by_key, *reading.write_units_by_key)}
    assert settings.jobs_table in owners <= tables
    assert sum(reading.write_units_by_key.values()) == reading.table_write_units + reading.index_write_units > 0
    assert sum(reading.read_units_by_key.values()) == reading.read_units > 0
    hottest, units = reading.hottest("write")
    assert hottest.split("|")[0].split(".")[0] == settings.jobs_table and units > 0


def test_a_requests_only_meter_counts_requests_and_records_and_bills_no_units() -> None:
    """`onward endpoint --meter requests` (bench/peer.py): without billing the meter must still count every
    request and Kinesis record (the requests per job a bench prints), and must not read items or re-run
    queries to bill them (what makes a billing meter cost the endpoint's time): a meter that ignored the
    flag would report units."""
    meter = Meter(REGION, billing=False)
    with EmbeddedEndpoint(meter=meter) as endpoint:
        db = endpoint.client("dynamodb")
        db.create_table(TableName="requests-only", BillingMode="PAY_PER_REQUEST",
                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
        db.put_item(TableName="requests-only", Item={"pk": {"S": "a"}, "body": {"S": "x" * 3000}})
        db.get_item(TableName="requests-only", Key={"pk": {"S": "a"}})
        db.query(TableName="requests-only", KeyConditionExpression="pk = :p",
                 ExpressionAttributeValues={":p": {"S": "a"}})
        kinesis = endpoint.client("kinesis")
        kinesis.create_stream(StreamName="requests-only", ShardCount=1)
        kinesis.put_records(StreamName="requests-only", Records=[
            {"Data": b"abc", "PartitionKey": "k"}, {"Data": b"de", "PartitionKey": "k"}])
        reading = meter.reset()
    assert {name: reading.requests[name] for name in
            ("dynamodb.PutItem", "dynamodb.GetItem", "dynamodb.Query", "kinesis.PutRecords")} == {
        "dynamodb.PutItem": 1, "dynamodb.GetItem": 1, "dynamodb.Query": 1, "kinesis.PutRecords": 1}
    assert (reading.kinesis_records, reading.kinesis_bytes) == (2, 3 + 1 + 2 + 1)
    assert reading.table_write_units == reading.index_write_units == 0
    assert not reading.write_units and reading.hottest("read") == reading.hottest("write") == ("", 0.0)
