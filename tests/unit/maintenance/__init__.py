"""Unit tests of onward/maintenance/: the backlog count the workers scale on and the scheduler's ticks over
the in-memory store."""
