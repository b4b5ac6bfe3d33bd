"""What operators and tenants read beside a job's status, and what operators do: why a job waits
(explain), overlapping attempts, conflicts, parked records, claim history, lag, bulk replay and cancel."""
