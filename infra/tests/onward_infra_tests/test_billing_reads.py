"""Read units and the attribution of write units to index partitions (infra/onward_infra/billing.py), and the meter's
reading by key (infra/onward_infra/metering.py MeterReading): its hottest key and its JSON."""

from __future__ import annotations

import json

import pytest

from onward_infra.billing import IndexSpec, IndexWrite, index_writes, read_units, write_cost
from onward_infra.metering import MeterReading, WriteCharge, charge_key

READY = IndexSpec("ready", ("ready_pk", "ready_due"), ("pk", "sk"), "KEYS_ONLY")


def test_read_units_round_up_per_4_kb_halved_when_eventually_consistent_doubled_in_a_transaction() -> None:
    assert [read_units(size, consistent=True) for size in (0, 1, 4096, 4097, 10_000)] == [1, 1, 1, 2, 3]
    assert [read_units(size, consistent=False) for size in (0, 4096, 10_000)] == [0.5, 0.5, 1.5]
    assert read_units(5120, consistent=True, transactional=True) == 4


def test_a_moved_index_entry_is_charged_removed_from_its_old_partition_and_added_to_its_new_one() -> None:
    queued = {"pk": {"S": "JOB#1"}, "sk": {"S": "JOB"}, "ready_pk": {"S": "a"}, "ready_due": {"N": "1"}}
    moved = {**queued, "ready_pk": {"S": "b"}}
    old_entry, new_entry = READY.project(queued), READY.project(moved)
    assert old_entry is not None and new_entry is not None
    assert index_writes(queued, moved, READY) == [IndexWrite(old_entry, 1), IndexWrite(new_entry, 1)]
    assert [write.entry[READY.partition_key] for write in index_writes(queued, None, READY)] == [{"S": "a"}]
    assert index_writes(queued, {**queued, "state": {"S": "x"}}, READY) == []  # KEYS_ONLY: unchanged
    assert write_cost(queued, moved, [READY], transactional=True).index_units == 2


def reading_with_charges() -> MeterReading:
    reading = MeterReading()
    reading.add("PutItem", [WriteCharge(charge_key("T", "A"), 2), WriteCharge(charge_key("T", "x", "ix"), 1, True)])
    reading.add("PutItem", [WriteCharge(charge_key("T", "B"), 2)])
    reading.add_read(charge_key("T", "A"), 0.5)
    reading.add_read(charge_key("T", "*scan*"), 1.5)
    return reading


def test_the_hottest_key_by_kind_among_those_not_excluded_ties_to_the_first_key() -> None:
    reading = reading_with_charges()
    assert (reading.table_write_units, reading.index_write_units, reading.write_units["dynamodb.PutItem"]) == (4, 1, 5)
    assert reading.hottest("write") == ("T|A", 2.0)  # tied with T|B
    assert reading.hottest("write", exclude=lambda key: key == "T|A") == ("T|B", 2.0)
    assert reading.hottest("read") == ("T|*scan*", 1.5)
    assert reading.hottest("read", exclude=lambda key: key.endswith("|*scan*")) == ("T|A", 0.5)
    assert reading.hottest("read", exclude=lambda key: True) == ("", 0.0)
    assert reading.read_units == 2.0
    with pytest.raises(ValueError, match="read"):
        reading.hottest("reads")  # type: ignore[arg-type]


def test_a_reading_round_trips_through_json_and_an_older_one_still_reads() -> None:
    reading = reading_with_charges()
    assert MeterReading.from_json(json.loads(json.dumps(reading.to_json()))) == reading
    older = {name: value for name, value in reading.to_json().items()
             if name not in ("read_units", "read_units_by_key", "write_units_by_key")}
    assert MeterReading.from_json(older).write_units_by_key == {}
    assert charge_key("T", "p", "ix") == "T.ix|p"
