"""The fence reconciler's function (FenceReconcilerFunction): the jobs table's stream -> restores of late
old-epoch writes and adoptions, in the Region that is home after a failover (onward.entrypoints.fence_reconciler)."""

from onward.entrypoints.fence_reconciler import handler

__all__ = ["handler"]
