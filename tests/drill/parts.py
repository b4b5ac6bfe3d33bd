"""How the drill drives issue 39's commands that run as processes of their own: `onward failover`, as an
operator runs it. The parts themselves (the store's fence, the authority lease, the fence reconciler) are
imported where they are used; what the audit reports as a part's row is what a part failed to do (the
failover exited non-zero, the old home's store acted under no authority lease), never whether its code is
in the tree."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ONWARD = str(Path(sys.executable).with_name("onward"))


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
