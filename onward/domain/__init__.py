"""The domain: job states and what each operation does to a job, dispatch, backoff, schedules,
freshness and projection, as pure functions over values (no I/O, no AWS SDK)."""
