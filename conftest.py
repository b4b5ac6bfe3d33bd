"""What every test of the repository shares, the product's (tests/) and the local stack's own (infra/tests/):
the embedded endpoint's fixtures (infra/tests/onward_infra_tests/stack_fixtures.py) and the tiers.

Tiers, marked at collection: `unit`, `contract`, `e2e` and `soak` by directory; `integration` for every test
that needs the embedded endpoint (it asks for the `endpoint` fixture, or says so with the mark); `fast` for
every test that needs neither the endpoint nor a process of its own (`make test-fast` runs these).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["onward_infra_tests.stack_fixtures"]

DIRECTORY_TIERS = ("unit", "contract", "e2e", "soak")
SLOW_TIERS = ("e2e", "soak")  # by directory, or marked so (a test that runs a tool of its own)


PRODUCT_TESTS = Path(__file__).resolve().parent / "tests"


def _tier_of(path: Path) -> str | None:
    """The tier folder a product test is in (tests/<tier>/..., at any depth: unit and integration mirror
    onward/'s folders inside them); the local stack's own tests are tiered by what they need only."""
    return path.relative_to(PRODUCT_TESTS).parts[0] if path.is_relative_to(PRODUCT_TESTS) else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = _tier_of(Path(str(item.path)).resolve())
        if tier in DIRECTORY_TIERS:
            item.add_marker(tier)
        needs_endpoint = "endpoint" in getattr(item, "fixturenames", ()) or item.get_closest_marker("integration")
        if needs_endpoint and not item.get_closest_marker("integration"):
            item.add_marker("integration")
        if not needs_endpoint and not any(item.get_closest_marker(slow) for slow in SLOW_TIERS):
            item.add_marker("fast")
