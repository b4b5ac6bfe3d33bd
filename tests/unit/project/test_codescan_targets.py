"""tests/codescan_targets.py: the table, index or stream each SDK call names, followed through the AST, on small
packages written for the test (the `package` fixture, tests/unit/project/conftest.py); and the call-graph rules
that keep a function's reading to the calls it can make (tests/codescan.py).

Each test fails when its rule goes: read only IndexName literals and the constant's index is missed (the
`overlaps` grant OperatorPolicy lacked); give every call every table its function names and the relay's Query
on the checkpoint table (never made) would pass as used.
"""

from __future__ import annotations

import pytest

from tests.codescan import read_code
from tests.codescan_modules import Unresolved

STORES = '''
    import boto3
    from pkg.names import OVERLAPS, PREFIX

    LEASES = "leases"


    def window_query(table, day):
        return {"TableName": table, "IndexName": f"{PREFIX}_time", "KeyConditionExpression": day}


    class Jobs:
        def __init__(self, client, table):
            self._db = client
            self._table = table

        def overlapping(self):
            return self._db.query(TableName=self._table, IndexName=OVERLAPS)

        def leased(self):
            requests = [{"TableName": self._table, "IndexName": LEASES, "Limit": n} for n in range(2)]
            return list(map(lambda request: self._db.query(**request), requests))


    class Outbox:
        def __init__(self, client, table):
            self._db = client
            self._table = table

        def window(self, day):
            return self._db.get_paginator("query").paginate(**window_query(self._table, day))

        def put(self, item):
            return self._db.put_item(TableName=self._table, Item=item)
'''


def test_an_index_named_by_a_constant_an_imported_one_or_an_f_string_is_read(package) -> None:
    """IndexName=OVERLAPS (imported), LEASES (the module's), f"{PREFIX}_time" in a helper's request dict, and a
    request list mapped through a lambda: each lands on the table its object was built with."""
    package(**{"pkg.names": 'OVERLAPS = "overlaps"\nPREFIX = "by"\n', "pkg.stores": STORES, "pkg.handler": '''
        import boto3
        from pkg.stores import Jobs, Outbox

        def handler(event, settings):
            db = boto3.client("dynamodb")
            jobs = Jobs(db, settings.require("jobs_table"))
            outbox = Outbox(db, settings.require("outbox_table"))
            return jobs.overlapping(), jobs.leased(), outbox.window(event["day"])
    '''})
    assert set(read_code(["pkg.handler:handler"]).accesses) == {
        ("dynamodb:Query", "jobs_table", "index/overlaps"), ("dynamodb:Query", "jobs_table", "index/leases"),
        ("dynamodb:Query", "outbox_table", "index/by_time")}


def test_each_call_is_granted_only_on_the_table_of_its_own_object(package) -> None:
    """Two stores over two tables: the outbox's put lands on the outbox only, not on every table the function
    names (which let a role keep an action on a table that never sees it)."""
    package(**{"pkg.names": 'OVERLAPS = "overlaps"\nPREFIX = "by"\n', "pkg.stores": STORES, "pkg.handler": '''
        import boto3
        from pkg.stores import Jobs, Outbox

        def handler(event, settings):
            db = boto3.client("dynamodb")
            Jobs(db, settings.require("jobs_table"))
            return Outbox(db, settings.require("outbox_table")).put(event)
    '''})
    assert set(read_code(["pkg.handler:handler"]).accesses) == {("dynamodb:PutItem", "outbox_table", "arn")}


def test_a_table_the_reading_cannot_follow_fails_the_reading(package) -> None:
    """A table name from the event (or anything else that is no setting): never guessed, never left out."""
    package(**{"pkg.handler": '''
        import boto3

        def handler(event, context):
            return boto3.client("dynamodb").get_item(TableName=event["table"], Key={})
    '''})
    with pytest.raises(Unresolved, match=r"pkg\.handler"):
        read_code(["pkg.handler:handler"])


def test_a_module_attribute_a_stored_one_and_a_valued_one_call_no_method_of_that_name(package) -> None:
    """`rules.claim(...)` is the module's function, not Claims.claim; `self.events = {}` and
    `self.events.get(...)` call no method `events` (a method object has no `.get`); a property of that name
    is still read, and so is a method called by it."""
    package(**{"pkg.rules": "def claim(job):\n    return job\n", "pkg.store": '''
        import boto3

        class Claims:
            def claim(self):
                return boto3.client("dynamodb").query(TableName=settings.require("jobs_table"))

        class Log:
            def events(self, job_id):
                return boto3.client("dynamodb").scan(TableName=settings.require("jobs_table"))

        class Counts:
            @property
            def total(self):
                return boto3.client("dynamodb").describe_table(TableName=settings.require("jobs_table"))
    ''', "pkg.handler": '''
        from pkg import rules
        from pkg.store import Claims, Counts, Log

        class State:
            def __init__(self):
                self.events = {}

            def seen(self, job_id):
                return job_id in self.events.get(job_id, {})

        def handler(event, context):
            rules.claim(event)
            return State().seen(event["id"]), Claims, Log, Counts().total.real
    '''})
    assert {call.operation for call in read_code(["pkg.handler:handler"]).calls} == {"DescribeTable"}
