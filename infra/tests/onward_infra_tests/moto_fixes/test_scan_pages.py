"""Scans on the embedded endpoint (infra/onward_infra/moto_fixes/scans.py): each page after the first starts by
bisection instead of moto's walk from the table's first item, and the pages are stock moto's."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from moto.dynamodb.models.table import Table

from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra_tests.moto_fixes.test_endpoint_hot_paths import Stack, every_page, stock_moto

_tables = itertools.count()


def _numbers_table(stack: Stack) -> str:
    """A table keyed by numbers (moto orders them as Decimals: 10 after 9, -1 first)."""
    name = f"scan-numbers-{next(_tables)}"
    stack.db.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                          KeySchema=[{"AttributeName": "n", "KeyType": "HASH"},
                                     {"AttributeName": "m", "KeyType": "RANGE"}],
                          AttributeDefinitions=[{"AttributeName": "n", "AttributeType": "N"},
                                                {"AttributeName": "m", "AttributeType": "N"}])
    return name


def _fill(stack: Stack, numbers: str) -> None:
    for number in range(40):
        stack.db.put_item(TableName=stack.jobs, Item={
            "pk": {"S": f"JOB#{number % 13:02d}"}, "sk": {"S": ("JOB", "RUN#1", "RUN#10", "RUN#2")[number % 4]},
            "n": {"N": str(number)}, "pad": {"S": "x" * (number * 37 % 400)}})
        stack.db.put_item(TableName=numbers, Item={"n": {"N": str(number % 11 - 1)}, "m": {"N": f"{number * 0.5}"},
                                                   "v": {"N": str(number)}})


def _pages(stack: Stack, table: str, **options: Any) -> list[Any]:
    return every_page(stack.db.scan, {"TableName": table, **options})


_SCANS: list[dict[str, Any]] = [
    {"Limit": 3},
    {"Limit": 7, "FilterExpression": "n > :n", "ExpressionAttributeValues": {":n": {"N": "12"}}},
    {"Limit": 5, "Segment": 1, "TotalSegments": 3},
    {"Limit": 4, "ProjectionExpression": "pk, n"},
    {},
]


def test_scan_pages_match_stock_moto(endpoint: EmbeddedEndpoint) -> None:
    """Pages of 3, pages with a filter, segments, projections and whole-table pages, on a table of string
    keys (RUN#10 sorts before RUN#2) and one of numeric keys: the same items, counts and LastEvaluatedKeys as
    stock moto. A mutant bisecting by the keys' text rather than their values would start a numeric
    table's page at the wrong item; one bisecting to the left would repeat the start key's item."""
    ours, stock = Stack(endpoint), Stack(endpoint)
    tables = {}
    for stack in (ours, stock):
        tables[id(stack)] = _numbers_table(stack)
        _fill(stack, tables[id(stack)])
    scanned = [_pages(ours, table, **options) for options in _SCANS for table in (ours.jobs, tables[id(ours)])]
    with stock_moto():
        expected = [_pages(stock, table, **options) for options in _SCANS
                    for table in (stock.jobs, tables[id(stock)])]
    assert scanned == expected
    assert len(scanned[0]) > 10  # many pages, each after a start key


def test_a_page_after_the_first_does_not_walk_the_table_from_its_start(
        endpoint: EmbeddedEndpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    """moto compares every item before a page's start key with it; here no item is compared that way."""
    stack = Stack(endpoint)
    _fill(stack, _numbers_table(stack))
    compared = []
    original = Table._item_comes_before_dct
    monkeypatch.setattr(Table, "_item_comes_before_dct",
                        lambda self, *args, **kwargs: compared.append(1) or original(self, *args, **kwargs))
    pages = _pages(stack, stack.jobs, Limit=4)
    assert len(pages) >= 10 and sum(page["Count"] for page in pages) == 40
    assert not compared


def _pages_with_writes(stack: Stack, numbers: str) -> list[Any]:
    """Pages of 4 of the numbers table, with an item put after the start, one put before it, one updated
    and one deleted between pages."""
    writes = iter([
        lambda: stack.db.put_item(TableName=numbers, Item={"n": {"N": "8"}, "m": {"N": "0.25"}, "v": {"N": "-1"}}),
        lambda: stack.db.put_item(TableName=numbers, Item={"n": {"N": "-1"}, "m": {"N": "99"}, "v": {"N": "-2"}}),
        lambda: stack.db.update_item(TableName=numbers, Key={"n": {"N": "9"}, "m": {"N": "4.5"}},
                                     UpdateExpression="SET v = :v", ExpressionAttributeValues={":v": {"N": "-3"}}),
        lambda: stack.db.delete_item(TableName=numbers, Key={"n": {"N": "9"}, "m": {"N": "15"}}),
    ])

    def write_next() -> None:
        next(writes, lambda: None)()

    return every_page(stack.db.scan, {"TableName": numbers, "Limit": 4}, write_next)


def test_pages_read_between_writes_see_them_as_stock_moto_does(endpoint: EmbeddedEndpoint) -> None:
    """The order kept between pages is dropped by any write: an item put after the page's start appears in
    a later page, an updated one shows its new value, a deleted one is gone, as in stock moto. A mutant
    keeping the order across writes would miss the new item and show the deleted one."""
    ours, stock = Stack(endpoint), Stack(endpoint)
    tables = {}
    for stack in (ours, stock):
        tables[id(stack)] = _numbers_table(stack)
        _fill(stack, tables[id(stack)])
    scanned = _pages_with_writes(ours, tables[id(ours)])
    with stock_moto():
        expected = _pages_with_writes(stock, tables[id(stock)])
    assert scanned == expected
    values = [int(item["v"]["N"]) for page in scanned for item in page["Items"]]
    assert -1 in values and -3 in values
