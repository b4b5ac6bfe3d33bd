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
    """The store's fence: onward.domain.regions and JobStore.region_epoch."""
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
                             "--reason", "drill: home partitioned", "--yes"],
                            env=environment, capture_output=True, text=True, timeout=300, check=False)
    return Failover(result.returncode == 0, time.monotonic() - started,
                    (result.stdout + result.stderr).strip()[-2000:])


def authority_lease(store: JobStore) -> Any | None:
    """The authority lease attached to `store` (onward.runtime.authority), None when there is none."""
    try:
        authority = importlib.import_module("onward.runtime.authority")
    except ImportError:
        return None
    return authority.lease_of(store)


def reconciler_missing() -> Missing | None:
    """The fence reconciler, or why it cannot run: it is not in this tree, or the store's fence it
    reads the epoch through is not."""
    try:
        importlib.import_module("onward.pipeline.fence_reconciler.reconciler")
    except ImportError as error:
        return Missing("fence reconciler", f"not in this tree: {error}")
    if fence_missing() is not None:
        return Missing("fence reconciler", "cannot run: the store's region fence (region_epoch, adopt) is missing")
    return None
