"""Tests of bench/ that need no endpoint: the fairness simulation (bench/fairness/) in a reduced mode."""
