"""The short regional failover drill (part of `make test`); the long one is `make drill`.

One small run (about 10 jobs a second, a few seconds each side of the partition) of tests/drill/driver.py:
A partitioned while it works, `onward failover --to B` as a command, B's workers, A's late writes healed in
and reconciled, then the audit. Two tests read the one run:
- the drill drove every part of issue 39 (none missing), and each part did something: the epoch was raised
  and jobs adopted, the old home's late writes were reconciled, B's page was read while it could not vouch for
  the old home, B claimed (an RTO was measured). Without this, a drill whose failover failed silently would
  audit nothing;
- its audit passes (`AUDIT PASSED`): no acknowledged job lost before T - RPO, no terminal state reopened, no
  status backwards in either Region, every double run on its run records, B's page honest until reconciled.
"""

from __future__ import annotations

import pytest

from tests.drill.driver import DrillConfig, DrillResult, run_drill

pytestmark = pytest.mark.integration

SHORT = DrillConfig(rate_per_s=10.0, warmup_s=3.0, a_after_fence_s=3.0, clients_after_s=3.0, workers=3,
                    settle_timeout_s=25.0, seed=11)


@pytest.fixture(scope="module")
def drill() -> DrillResult:
    result = run_drill(SHORT)
    print(f"\nshort drill: {result.seconds:.1f} s\n{result.audit.table()}")
    return result


def test_the_drill_drives_every_part_and_each_acts(drill: DrillResult) -> None:
    figures = dict(drill.audit.figures)
    assert not [line.check for line in drill.audit.lines if line.check.startswith("issue 39 part present")]
    assert drill.failover is not None and drill.failover.ok, drill.failover
    assert int(figures["B rows of a new epoch (adopted or created there)"]) > 0
    assert int(figures["reconciled (late writes undone or adopted)"]) > 0
    assert int(figures["page reads in B after the failover"]) > 0
    assert figures["RTO measured (T to B's first claim)"] != "none"
    assert int(figures["attempts run in A"]) > 0 and int(figures["attempts run in B"]) > 0


def test_the_short_drill_passes_its_audit(drill: DrillResult) -> None:
    assert drill.audit.ok, "\n".join(f"{line.check}: {line.violations} ({line.detail})"
                                     for line in drill.audit.failed())
