"""What the local replicator costs a Region's writes, and how close to its lag it delivers.

    .venv/bin/python -m bench.replication [--writes 1000] [--rounds 3]

Two embedded endpoints in this process as two Regions (onward_infra/replication/), one table in both. Each
round times the same number of 200-byte PutItems, one thread, against the home Region: once with no
replicator (the write tap idle: one list check a request) and once with the replicator on (the tap reads the
item and queues it; a thread applies it in the other Region), alternating so that the machine's noise falls on
both; then, with a lag of 0.2 s, the commit-to-apply time of each change. Printed: writes per second each way,
their ratio, and the replicated latency's mean and max against the lag.
"""

from __future__ import annotations

import argparse
import time
import uuid

from onward_infra.endpoint import EmbeddedEndpoint
from onward_infra.replication.replicator import Replicator

HOME, STANDBY = "eu-west-1", "eu-central-1"


def _table(endpoint: EmbeddedEndpoint, name: str) -> None:
    endpoint.client("dynamodb").create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])


def _writes_per_s(client: object, table: str, writes: int) -> float:
    started = time.perf_counter()
    for number in range(writes):
        client.put_item(TableName=table, Item={"pk": {"S": f"{uuid.uuid4().hex}-{number}"},  # type: ignore[attr-defined]
                                               "v": {"S": "x" * 160}})
    return writes / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--writes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    with EmbeddedEndpoint(region=HOME) as home, EmbeddedEndpoint(region=STANDBY) as standby:
        table = f"bench-{uuid.uuid4().hex[:8]}"
        _table(home, table)
        _table(standby, table)
        client = home.client("dynamodb")
        _writes_per_s(client, table, 100)  # warm-up
        alone: list[float] = []
        replicated: list[float] = []
        for _ in range(arguments.rounds):
            alone.append(_writes_per_s(client, table, arguments.writes))
            with Replicator([home, standby], {"t": {HOME: table, STANDBY: table}}) as replicator:
                replicated.append(_writes_per_s(client, table, arguments.writes))
                replicator.wait_idle(60)
        with Replicator([home, standby], {"t": {HOME: table, STANDBY: table}}) as replicator:
            replicator.set_lag(0.2)
            for number in range(200):
                client.put_item(TableName=table, Item={"pk": {"S": f"lag-{number}"}})
                time.sleep(0.005)
            replicator.wait_idle(60)
            link = replicator.link(HOME, STANDBY).counts()
    best_alone, best_replicated = max(alone), max(replicated)
    print(f"PutItem, one thread, {arguments.writes} writes x {arguments.rounds} rounds (best round):")
    print(f"  no replicator    {best_alone:8.0f} writes/s")
    print(f"  replicator on    {best_replicated:8.0f} writes/s   ratio {best_replicated / best_alone:.2f}")
    print(f"  lag 0.2 s: commit-to-apply mean {link['latency_mean_s']:.3f} s, max {link['latency_max_s']:.3f} s "
          f"over {link['replicated']} changes")


if __name__ == "__main__":
    main()
