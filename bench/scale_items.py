"""What pays each write unit of a realistic run (bench/scale_realistic.py): its units per job by kind of item,
from the meter's per-partition counts (onward_infra.metering: `write_units_by_key`) and, inside a job's
partition, its per-sort-key counts (`write_units_by_sort_key`), which tell the job row (`JOB`) from its run
records (`RUN#<attempt>`) and a result item (`RESULT`, written before issue 34: 0 now).

Kinds are told apart by table and index, then by the partition key's shape (onward.store.dynamo.keys):
`JOB#<id>` a job's partition, `TENANT#<t>#QUEUE#<k>` a queue entry, `TENANT#<t>#RUNNING#<j>` a RUNNING
counter; in the outbox a job's events (a job id) from pipeline heartbeats (`HEARTBEAT#<slot>`); every write to
a global secondary index is its index's (`jobs.active`, `outbox.by_time`, ...). Anything else (Idempotency-Keys,
heartbeats, checkpoints, clocks, settings) is `others`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

JOB_PARTITION = "JOB#"
TENANT_PARTITION = "TENANT#"
JOB_ROW_SORT_KEY = "JOB"
RUN_SORT_KEY = "RUN#"
RESULT_SORT_KEY = "RESULT"
KINDS = ("job_row", "run_record", "result", "tenant_queue_entries", "tenant_running_counters", "outbox_events",
         "status_rows", "others")


def _kind(table: str, partition: str) -> str:
    """The kind of item a table write (not an index's) of `table` (logical name) in `partition` pays for;
    a job's partition is `job_partition`, split by sort key afterwards."""
    if table == "jobs":
        if partition.startswith(JOB_PARTITION):
            return "job_partition"
        if partition.startswith(TENANT_PARTITION) and "#QUEUE#" in partition:
            return "tenant_queue_entries"
        if partition.startswith(TENANT_PARTITION) and "#RUNNING#" in partition:
            return "tenant_running_counters"
    if table == "outbox" and not partition.startswith("HEARTBEAT#"):
        return "outbox_events"
    if table == "status":
        return "status_rows"
    return "others"


def write_units_by_item(by_key: Mapping[str, float], by_sort_key: Mapping[str, float], names: Mapping[str, str],
                        jobs: int) -> dict[str, Any]:
    """Write units per job by kind of item (KINDS) and, under `indexes`, per global secondary index.
    `by_key`: "<table>[.<index>]|<partition>" -> units (billed keys only), `by_sort_key`: "<table>|<sort key>"
    -> units, with physical table names that `names` turns into logical ones ("jobs", "outbox", ...)."""
    kinds: Counter[str] = Counter()
    indexes: Counter[str] = Counter()
    for key, units in by_key.items():
        table, _, partition = key.partition("|")
        base, dot, index = table.partition(".")
        logical = names.get(base, base)
        if dot:
            indexes[f"{logical}.{index}"] += units
        else:
            kinds[_kind(logical, partition)] += units
    job_partition = kinds.pop("job_partition", 0)
    for key, units in by_sort_key.items():
        table, _, sort_key = key.partition("|")
        if names.get(table, table) != "jobs":
            continue
        if sort_key == JOB_ROW_SORT_KEY:
            kinds["job_row"] += units
        elif sort_key.startswith(RUN_SORT_KEY):
            kinds["run_record"] += units
        elif sort_key == RESULT_SORT_KEY:
            kinds["result"] += units
    kinds["others"] += job_partition - kinds["job_row"] - kinds["run_record"] - kinds["result"]  # (none seen)
    figures: dict[str, Any] = {kind: round(kinds[kind] / jobs, 3) for kind in KINDS}
    figures["indexes"] = {index: round(units / jobs, 3) for index, units in sorted(indexes.items())}
    return figures
