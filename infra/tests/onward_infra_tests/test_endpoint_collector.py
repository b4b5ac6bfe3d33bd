"""The endpoint process's cyclic collector (infra/onward_infra/endpoint.py: collect_for_a_large_heap)."""

from __future__ import annotations

import gc

from onward_infra.endpoint import ENDPOINT_COLLECTOR_THRESHOLDS, collect_for_a_large_heap


def test_what_exists_once_deployed_is_frozen_and_the_collector_runs_less_often() -> None:
    """Breaks if the heap is not frozen (each full collection walks moto's whole state again: a tenth of the
    endpoint's CPU in a burst) or if the thresholds stay Python's (a young collection every 700 allocations).
    Garbage made after it, even in a cycle, is still collected."""
    thresholds = gc.get_threshold()
    try:
        collect_for_a_large_heap()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == ENDPOINT_COLLECTOR_THRESHOLDS
        assert ENDPOINT_COLLECTOR_THRESHOLDS[0] > thresholds[0]

        class Node:
            partner: object = None

        first, second = Node(), Node()
        first.partner, second.partner = second, first  # a cycle, freed by the collector only
        del first, second
        assert gc.collect() >= 2
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
