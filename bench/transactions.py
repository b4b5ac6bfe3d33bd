"""TransactWriteItems throughput on the embedded endpoint: stock moto vs our fix, small vs large table.

    .venv/bin/python -m bench.transactions [--json]

Each transaction is the job store's own create (onward.store.service.JobStore.create): ONE TransactWriteItems
request with a conditional Put of the job row and a conditional Put of its outbox event (the outbox
table has a stream). It runs over real HTTP against an EmbeddedEndpoint, into a fresh stack whose jobs
table was first filled to ~100 or ~20,000 job rows with BatchWriteItem (25 rows a request).

Both implementations are measured in one run, on one endpoint: our fix (onward_infra.moto_fixes.install()) and
stock moto (uninstall()). Stock moto deep-copies every table a transaction touches, so at 20,000 rows it
manages ~2 transactions a second: its large-table run is capped at a few transactions; every other run
is time-boxed. The fixed endpoint must not slow down with the table: small/large throughput <= 2, else
the exit status is 1. Figures are throughputs on a shared machine: compare ratios, not absolute values.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table

from onward.domain.models import NewJob
from onward.settings import Settings
from onward.store.dynamo.attributes import to_item
from onward.store.service import JobStore
from onward_infra import moto_fixes
from onward_infra.endpoint import EmbeddedEndpoint

SMALL, LARGE = 100, 20_000
MAX_FIXED_RATIO = 2.0
TENANT = "bench"
BATCH = 25
IMPLEMENTATIONS = ("fixed", "stock")  # fixed first: stock leaves its table copies behind in memory

@dataclass(frozen=True)
class Budget:
    """How long one measurement runs: until `seconds` have passed or `max_transactions` were made,
    whichever comes first, and never fewer than `min_transactions`."""

    seconds: float
    max_transactions: int
    min_transactions: int = 3


FULL_BUDGETS = {
    ("fixed", "small"): Budget(3.0, 100_000),
    ("fixed", "large"): Budget(3.0, 100_000),
    ("stock", "small"): Budget(3.0, 100_000),
    ("stock", "large"): Budget(20.0, 20),  # under 2 tx/s: capped by time more often than by count
}


@dataclass(frozen=True)
class Measurement:
    implementation: str
    table_items: int  # job rows in the jobs table when the timed transactions started
    transactions: int
    seconds: float
    requests: int  # HTTP requests the client sent during the timed transactions
    table_copies: int  # moto Table objects created during the timed transactions (deep copies)

    @property
    def tx_per_s(self) -> float:
        return self.transactions / self.seconds

    @property
    def requests_per_transaction(self) -> float:
        return self.requests / self.transactions


def _use(implementation: str) -> None:
    """Put the implementation's transaction method in place, and check that it is."""
    if implementation == "fixed":
        moto_fixes.install()
    else:
        moto_fixes.uninstall()
    _check(implementation)


def _check(implementation: str) -> None:
    fixed_in_place = DynamoDBBackend.transact_write_items is moto_fixes.transactions.transact_write_items
    if fixed_in_place != (implementation == "fixed"):
        raise RuntimeError(f"the {implementation} transaction method is not in effect")


def _job_row(index: int, now_ms: int) -> dict[str, Any]:
    """A queued job row shaped like the store's (same keys, index attributes and rough size)."""
    job_id = uuid.uuid4().hex
    return to_item({
        "pk": f"JOB#{job_id}", "sk": "JOB", "entity": "job", "job_id": job_id, "tenant_id": "filler",
        "type": "bench.fill", "params": {"index": index, "note": "x" * 200}, "state": "queued",
        "version": 1, "attempt": 0, "attempt_floor": 0, "max_attempts": 3, "not_before": now_ms,
        "cancel_requested": False, "created_at": now_ms, "updated_at": now_ms, "ready_shards": 1,
        "ready_pk": "filler#0", "ready_due": now_ms,
    })


def fill(client: Any, table: str, rows: int) -> None:
    """Write `rows` job rows with BatchWriteItem, 25 a request, resending anything unprocessed."""
    now_ms = int(time.time() * 1000)
    for start in range(0, rows, BATCH):
        requests = {table: [{"PutRequest": {"Item": _job_row(i, now_ms)}}
                            for i in range(start, min(start + BATCH, rows))]}
        while requests:
            requests = client.batch_write_item(RequestItems=requests).get("UnprocessedItems") or {}


def measure(endpoint: EmbeddedEndpoint, implementation: str, rows: int, budget: Budget) -> Measurement:
    """Throughput of JobStore.create on a fresh stack whose jobs table holds `rows` job rows."""
    environment = endpoint.deploy(f"bench-{implementation}-{rows}-{uuid.uuid4().hex[:8]}").environment
    client = endpoint.client("dynamodb")
    fill(client, environment["JOBS_TABLE"], rows)
    table_items = client.describe_table(TableName=environment["JOBS_TABLE"])["Table"]["ItemCount"]
    settings = Settings(environment["JOBS_TABLE"], environment["OUTBOX_TABLE"], endpoint.url, "us-east-1")
    store = JobStore(settings, client=client)
    request = NewJob(type="bench.job", params={"size": "small", "note": "y" * 100})

    _use(implementation)
    for _ in range(2):  # warm up: registers the tenant, opens the connection
        store.create(TENANT, request)

    requests = 0

    def count(**_: Any) -> None:
        nonlocal requests
        requests += 1

    client.meta.events.register("before-send.dynamodb", count)
    copies_before = len(Table.instances_tracked)  # type: ignore[attr-defined]  # set by moto's metaclass
    transactions = 0
    start = time.perf_counter()
    while transactions < budget.min_transactions or (
        transactions < budget.max_transactions and time.perf_counter() - start < budget.seconds
    ):
        store.create(TENANT, request)
        transactions += 1
    seconds = time.perf_counter() - start
    client.meta.events.unregister("before-send.dynamodb", count)
    _check(implementation)
    return Measurement(implementation, table_items, transactions, seconds, requests,
                       len(Table.instances_tracked) - copies_before)  # type: ignore[attr-defined]  # idem


def run(
    endpoint: EmbeddedEndpoint | None = None,
    *,
    small: int = SMALL,
    large: int = LARGE,
    implementations: tuple[str, ...] = IMPLEMENTATIONS,
    budgets: dict[tuple[str, str], Budget] | None = None,
) -> dict[str, Any]:
    """Measure each implementation at both sizes; return the figures (see `report`)."""
    budgets = budgets or FULL_BUDGETS
    own = endpoint is None
    running = EmbeddedEndpoint().start() if endpoint is None else endpoint
    try:
        results: dict[str, Any] = {"sizes": {"small": small, "large": large}}
        for implementation in implementations:
            at = {size: measure(running, implementation, rows, budgets[(implementation, size)])
                  for size, rows in (("small", small), ("large", large))}
            results[implementation] = {
                **{size: {**asdict(m), "tx_per_s": round(m.tx_per_s, 2),
                          "requests_per_transaction": round(m.requests_per_transaction, 3)}
                   for size, m in at.items()},
                "ratio_small_over_large": round(at["small"].tx_per_s / at["large"].tx_per_s, 3),
            }
    finally:
        moto_fixes.install()  # leave the endpoint as EmbeddedEndpoint made it
        if own:
            running.stop()
    if "fixed" in results and "stock" in results:
        results["speedup_fixed_over_stock_at_large"] = round(
            results["fixed"]["large"]["tx_per_s"] / results["stock"]["large"]["tx_per_s"], 1)
    per_tx = {results[i][s]["requests_per_transaction"] for i in implementations for s in ("small", "large")}
    results["requests_per_transaction"] = per_tx.pop() if len(per_tx) == 1 else sorted(per_tx)
    if "fixed" in results:
        results["fixed_ratio_limit"] = MAX_FIXED_RATIO
        results["ok"] = results["fixed"]["ratio_small_over_large"] <= MAX_FIXED_RATIO
    return results


def report(results: dict[str, Any]) -> str:
    small, large = results["sizes"]["small"], results["sizes"]["large"]
    lines = [
        "TransactWriteItems throughput (JobStore.create: conditional Put of the job row + Put of its outbox",
        "event, one request each), over HTTP to the embedded endpoint, one run:",
        "",
        f"{'implementation':<15}{f'tx/s @ {small:,}':>14}{f'tx/s @ {large:,}':>16}"
        f"{'small/large':>13}{'tx measured':>14}{'table copies':>14}",
    ]
    for implementation in ("stock", "fixed"):
        if implementation not in results:
            continue
        r = results[implementation]
        lines.append(
            f"{implementation:<15}{r['small']['tx_per_s']:>14,.1f}{r['large']['tx_per_s']:>16,.1f}"
            f"{r['ratio_small_over_large']:>13.2f}"
            f"{str(r['small']['transactions']) + ' / ' + str(r['large']['transactions']):>14}"
            f"{str(r['small']['table_copies']) + ' / ' + str(r['large']['table_copies']):>14}"
        )
    lines.append("")
    if "speedup_fixed_over_stock_at_large" in results:
        lines.append(f"fixed / stock at {large:,} rows: {results['speedup_fixed_over_stock_at_large']}x")
    lines.append(f"requests per transaction: {results['requests_per_transaction']}")
    if "fixed" in results:
        verdict = "OK" if results["ok"] else "FAIL"
        lines.append(f"fixed small/large ratio {results['fixed']['ratio_small_over_large']:.2f} "
                     f"(limit {results['fixed_ratio_limit']}): {verdict}")
    lines.append("(table copies: moto Table objects created during the timed transactions, small / large)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    results = run()
    print(json.dumps(results, sort_keys=True) if args.json else report(results))
    return 0 if results.get("ok", True) else 1


if __name__ == "__main__":
    sys.exit(main())
