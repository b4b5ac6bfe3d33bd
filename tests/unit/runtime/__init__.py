"""Unit tests of onward/runtime/: the worker (lease renewal, idle backoff, timeouts), its handler process,
the pool's drain and the Lambda worker's drain."""
