"""Weighted fair share with 1,000 waiting tenants on DynamoDB (the embedded endpoint): the long variant of
tests/integration/store/test_fairness_at_scale.py, which runs it in memory in `make test` (28,000 claims take
about ten minutes here). `make soak` runs it:

    .venv/bin/python -m tests.soak.fairness_at_scale [--tenants N]

Exit status 1 when a tenant's share is more than 5% off its fair share.
"""

from __future__ import annotations

import argparse
import sys

from onward.settings import Settings
from onward.store.service import JobStore
from onward_infra.endpoint import EmbeddedEndpoint
from tests.integration.store.test_fairness_at_scale import assert_weighted_shares
from tests.support import ManualClock


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", type=int, default=1_000)
    args = parser.parse_args(argv)
    weights = {f"t{n:04d}": 5.0 if n % 10 == 0 else 1.0 for n in range(args.tenants)}
    clock = ManualClock()
    with EmbeddedEndpoint() as endpoint:
        settings = Settings.from_environment(endpoint.deploy("fairness-soak").environment)
        store = JobStore(settings, client=endpoint.client("dynamodb"), clock=clock)
        try:
            assert_weighted_shares(store, clock, weights, workers=40)
        except AssertionError as error:
            print(f"fairness at scale: FAILED, worst shares {error}", file=sys.stderr)
            return 1
    print(f"fairness at scale: {args.tenants} waiting tenants, every share within 5% of fair")
    return 0


if __name__ == "__main__":
    sys.exit(main())
