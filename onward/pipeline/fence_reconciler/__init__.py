"""The fence reconciler (issue 39): a consumer of the jobs table's stream in the Region that became home,
undoing old-epoch writes that replicated in after the failover and adopting jobs the new home never adopted
(onward.domain.fence_reconciliation decides, reconciler.py writes)."""
