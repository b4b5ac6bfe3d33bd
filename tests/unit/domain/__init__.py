"""Unit tests of onward/domain/: states, lifecycle, dispatch, backoff, freshness, projection and the other
pure decisions, checked on values alone."""
