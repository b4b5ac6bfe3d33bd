"""The job store in memory: the ports over domain values in dicts under one lock, for tests and the
handler test harness."""
