"""Unit tests of onward/pipeline/: the relay and its publisher, the projector's folds, heartbeat slots and
the status view's reads, without AWS."""
