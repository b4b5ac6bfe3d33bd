"""Unit tests of onward/testing/: JobHarness as a handler author uses it."""
