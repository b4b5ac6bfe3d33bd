"""DynamoDB's billing arithmetic (infra/onward_infra/billing.py), checked against the developer guide's rules."""

from __future__ import annotations

from onward_infra.billing import IndexSpec, item_size, units, value_size, write_cost

READY = IndexSpec("ready", ("ready_pk", "ready_due"), ("pk", "sk"), "KEYS_ONLY")
BY_TENANT = IndexSpec("by_tenant", ("tenant_id", "occurred_at"), ("job_id",), "ALL")


def test_value_sizes_follow_the_guide() -> None:
    assert value_size({"S": "héllo"}) == 6  # UTF-8 bytes
    assert value_size({"N": "12345"}) == 4  # 5 significant digits -> 3 bytes, plus 1
    assert value_size({"N": "-1.50"}) == 2
    assert value_size({"BOOL": True}) == value_size({"NULL": True}) == 1
    assert value_size({"B": "AAEC"}) == 3  # base64 of 3 bytes
    assert value_size({"L": [{"S": "ab"}, {"N": "1"}]}) == 3 + (1 + 2) + (1 + 2)
    assert value_size({"M": {"k": {"S": "v"}}}) == 3 + 1 + 1 + 1
    assert item_size({"pk": {"S": "JOB#1"}, "n": {"N": "7"}}) == 2 + 5 + 1 + 2


def test_units_round_up_per_kb_and_never_below_one() -> None:
    assert [units(0), units(1), units(1024), units(1025), units(4096)] == [1, 1, 1, 2, 4]


def test_a_transactional_write_costs_twice_and_a_new_index_entry_one_more() -> None:
    row = {"pk": {"S": "JOB#1"}, "sk": {"S": "JOB"}, "ready_pk": {"S": "acme#0#0"}, "ready_due": {"N": "1"}}
    cost = write_cost(None, row, [READY], transactional=True)
    assert (cost.table_units, cost.index_units) == (2, 1)
    assert write_cost(None, row, [READY], transactional=False).table_units == 1


def test_index_costs_for_leaving_changing_key_and_untouched_entries() -> None:
    queued = {"pk": {"S": "JOB#1"}, "sk": {"S": "JOB"}, "ready_pk": {"S": "a"}, "ready_due": {"N": "1"},
              "state": {"S": "queued"}}
    running = {"pk": {"S": "JOB#1"}, "sk": {"S": "JOB"}, "state": {"S": "running"}}
    assert write_cost(queued, running, [READY], transactional=True).index_units == 1  # entry removed
    later = {**queued, "ready_due": {"N": "2"}}
    assert write_cost(queued, later, [READY], transactional=True).index_units == 2  # key changed: delete + put
    other_state = {**queued, "state": {"S": "retry_wait"}}
    assert write_cost(queued, other_state, [READY], transactional=True).index_units == 0  # KEYS_ONLY unchanged


def test_an_all_projection_index_rewrites_when_any_attribute_changes() -> None:
    view = {"job_id": {"S": "1"}, "tenant_id": {"S": "acme"}, "occurred_at": {"S": "t1"}, "status": {"S": "queued"}}
    assert write_cost(view, {**view, "status": {"S": "running"}}, [BY_TENANT], transactional=False).index_units == 1
    big = {**view, "blob": {"S": "x" * 3000}}
    assert write_cost(None, big, [BY_TENANT], transactional=False).total == 3 + 3
