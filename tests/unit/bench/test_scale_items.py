"""bench/scale_items.py: a realistic run's write units per job by what pays them, from made-up meter counts."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.scale_items import KINDS, write_units_by_item

NAMES = {"stack-Jobs-1": "jobs", "stack-Outbox-2": "outbox", "stack-Status-3": "status", "stack-Cp-4": "checkpoint"}
JOBS = 10


def test_each_unit_is_charged_to_the_kind_of_item_that_paid_it():
    """The partition key's shape tells the tenant's items apart, an index's writes are its own, the outbox's
    heartbeats are not job events, and a job's partition is split by sort key into its row, its run records
    and an old result item. Without the split the job's partition would be one figure (which of the row or
    the runs dominates unknown); without the shapes a queue entry's units would be taken for a counter's."""
    by_key = Counter({
        "stack-Jobs-1|JOB#a": 100, "stack-Jobs-1|JOB#b": 20,
        "stack-Jobs-1|TENANT#acme#QUEUE#0": 60, "stack-Jobs-1|TENANT#acme#RUNNING#1": 50,
        "stack-Jobs-1|IDEM#acme#k": 4, "stack-Jobs-1|CLOCK#0": 3,
        "stack-Jobs-1.active|ACTIVE#3": 30, "stack-Jobs-1.ready|acme#0#0": 20,
        "stack-Outbox-2|a": 60, "stack-Outbox-2|HEARTBEAT#7": 5, "stack-Outbox-2.by_time|2026-12-05T01#3": 30,
        "stack-Status-3|a": 16, "stack-Status-3.by_listing|acme#2": 23, "stack-Cp-4|relay": 2,
    })
    by_sort_key = Counter({"stack-Jobs-1|JOB": 60, "stack-Jobs-1|RUN#000001": 40, "stack-Jobs-1|RUN#000002": 10,
                           "stack-Jobs-1|RESULT": 10, "stack-Jobs-1|QUEUE": 60, "stack-Outbox-2|1": 20})

    figures = write_units_by_item(by_key, by_sort_key, NAMES, JOBS)

    assert figures == {
        "job_row": 6.0, "run_record": 5.0, "result": 1.0, "tenant_queue_entries": 6.0,
        "tenant_running_counters": 5.0, "outbox_events": 6.0, "status_rows": 1.6,
        "others": pytest.approx((4 + 3 + 5 + 2) / JOBS),
        "indexes": {"jobs.active": 3.0, "jobs.ready": 2.0, "outbox.by_time": 3.0, "status.by_listing": 2.3},
    }
    total = sum(figures[kind] for kind in KINDS) + sum(figures["indexes"].values())
    assert total == pytest.approx(sum(by_key.values()) / JOBS), "every unit counted once"
