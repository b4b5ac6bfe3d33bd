"""Fixtures of the store's integration tests."""

from tests.integration.store.metering import metered

__all__ = ["metered"]
