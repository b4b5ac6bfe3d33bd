"""The parts of issue 39 the drill drives, each through its interface (docs/briefs' shared interface): the
store's region fence, `onward failover`, the authority lease and the fence reconciler. A part that is not in
this tree is answered as `Missing` with the reason, and the audit reports its row failed for it: the drill
never stands in for a part with code of its own (a stand-in would audit the stand-in)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onward.bootstrap import Deployment
from onward.store.service import JobStore
from tests.drill.history import Missing

ONWARD = str(Path(sys.executable).with_name("onward"))


def fence_missing() -> Missing | None:
    """The store's fence (fence39): onward.domain.regions and JobStore.region_epoch."""
    try:
        importlib.import_module("onward.domain.regions")
    except ImportError as error:
        return Missing("region fence (onward.domain.regions, JobStore.region_epoch)", f"not in this tree: {error}")
    if not hasattr(JobStore, "region_epoch"):
        return Missing("region fence (JobStore.region_epoch)", "JobStore has no region_epoch")
    return None


def region_epoch_of(deployment: Deployment) -> int:
    """The Region's epoch item (0 when the fence is not there or the item is absent)."""
    store = deployment.job_store
    reader = getattr(store, "region_epoch", None)
    if not callable(reader):
        return 0
    return int(reader().epoch)


@dataclass(frozen=True)
class Failover:
    ok: bool
    seconds: float
    output: str


def run_failover(environment: dict[str, str], to: str, fence_window_s: float) -> Failover:
    """`onward failover --to REGION --fence-window-s N` as an operator runs it (a command of its own)."""
    started = time.monotonic()
    result = subprocess.run([ONWARD, "failover", "--to", to, "--fence-window-s", str(fence_window_s),
                             "--reason", "drill: home partitioned"],
                            env=environment, capture_output=True, text=True, timeout=300, check=False)
    return Failover(result.returncode == 0, time.monotonic() - started,
                    (result.stdout + result.stderr).strip()[-2000:])


def authority_lease(deployment: Deployment) -> Any | None:
    """The old home's authority lease (auth39), None when it is not in this tree."""
    return None


class ReconcilerLoop:
    """The fence reconciler (onward.pipeline.fence_reconciler) on B's jobs-table stream, as its Lambda mapping
    runs it: each shard read from its trim horizon in order, a failed batch read again from its failed record.
    `poll_once` answers the records it handled (0: caught up)."""

    def __init__(self, deployment: Deployment, store: JobStore) -> None:
        from onward.pipeline.fence_reconciler.reconciler import FenceReconciler, ReconcileTally

        table = deployment.settings.require("jobs_table")
        self._db = deployment.client("dynamodb")
        self._streams = deployment.client("dynamodbstreams")
        self._arn = self._db.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        self._reconciler = FenceReconciler(self._db, table, store)
        self.tally = ReconcileTally()
        self.failures = 0
        self._iterators: dict[str, str | None] = {}

    @property
    def reconciled(self) -> int:
        return self.tally.restored + self.tally.adopted

    def poll_once(self) -> int:
        from onward.pipeline.fence_reconciler.reconciler import JobsStreamRecord

        shards = self._streams.describe_stream(StreamArn=self._arn)["StreamDescription"]["Shards"]
        for shard in shards:
            if shard["ShardId"] not in self._iterators:
                self._iterators[shard["ShardId"]] = self._streams.get_shard_iterator(
                    StreamArn=self._arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        handled = 0
        for shard_id, iterator in list(self._iterators.items()):
            if iterator is None:
                continue
            response = self._streams.get_records(ShardIterator=iterator, Limit=1000)
            raw = response["Records"]
            records = [JobsStreamRecord(r["dynamodb"]["SequenceNumber"], r["dynamodb"].get("OldImage"),
                                        r["dynamodb"].get("NewImage"),
                                        int(r["dynamodb"]["ApproximateCreationDateTime"].timestamp() * 1000))
                       for r in raw]
            failure = self._reconciler.reconcile(records, self.tally) if records else None
            if failure is None:
                self._iterators[shard_id] = response.get("NextShardIterator")
                handled += len(records)
                continue
            self.failures += 1
            print(f"drill: the fence reconciler failed at a record: {failure.error!r}", file=sys.stderr)
            self._iterators[shard_id] = self._streams.get_shard_iterator(
                StreamArn=self._arn, ShardId=shard_id, ShardIteratorType="AT_SEQUENCE_NUMBER",
                SequenceNumber=records[failure.at].sequence_number)["ShardIterator"]
            handled += failure.at
        return handled


def reconciler(deployment: Deployment, store: JobStore) -> ReconcilerLoop | Missing:
    """B's fence reconciler (recon39), or why it cannot run: it is not in this tree, or the store's fence it
    reads the epoch through (fence39) is not."""
    try:
        importlib.import_module("onward.pipeline.fence_reconciler.reconciler")
    except ImportError as error:
        return Missing("fence reconciler", f"not in this tree: {error}")
    if fence_missing() is not None:
        return Missing("fence reconciler", "cannot run: the store's region fence (region_epoch, adopt) is missing")
    return ReconcilerLoop(deployment, store)
