"""bench/transactions.py in a reduced mode: the fixed endpoint only, 100 vs 5,000 job rows, a few hundred
transactions. Only ratios are asserted, never absolute times: the machine is shared and noisy."""

from __future__ import annotations

import pytest
from moto.dynamodb.models import DynamoDBBackend

from bench import transactions
from onward_infra import moto_fixes
from onward_infra.endpoint import EmbeddedEndpoint

pytestmark = pytest.mark.integration

def test_fixed_transaction_throughput_does_not_fall_with_table_size(endpoint: EmbeddedEndpoint) -> None:
    """With our fix, a transaction costs the same on a 5,000-row table as on a 100-row one: throughput
    at 5,000 rows is at least a third of that at 100 (generous: the machine is shared). Each create is
    one request (and the clock's read once a second), and no table is copied. Stock moto, which deep-copies
    every touched table, falls ~60x between 100 and 20,000 rows (see the bench itself)."""
    budget = transactions.Budget(seconds=1.5, max_transactions=400, min_transactions=30)

    results = transactions.run(endpoint, small=100, large=5_000, implementations=("fixed",),
                               budgets={("fixed", "small"): budget, ("fixed", "large"): budget})

    fixed = results["fixed"]
    assert fixed["small"]["table_items"] == 100
    assert fixed["large"]["table_items"] == 5_000
    assert fixed["large"]["tx_per_s"] >= fixed["small"]["tx_per_s"] / 3, results
    # one request per create, and the system clock a process that creates jobs reads once a second
    per_transaction = results["requests_per_transaction"]
    assert all(1.0 <= requests <= 1.02 for requests in (per_transaction if isinstance(per_transaction, list)
                                                         else [per_transaction])), results
    assert fixed["small"]["table_copies"] == 0 and fixed["large"]["table_copies"] == 0
    assert DynamoDBBackend.transact_write_items is moto_fixes.transactions.transact_write_items  # left as it found it
