"""The job store in memory: the same ports held in dicts under one lock, for tests and the
handler test harness."""
