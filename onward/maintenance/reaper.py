"""The reaper: on a schedule, hands jobs whose lease lapsed back to the queue (or to quarantine)."""

from __future__ import annotations

from aws_lambda_powertools import Logger

from onward.runtime import authority
from onward.store.service import JobStore

logger = Logger(service="onward-reaper")


def reap_once(store: JobStore) -> int:
    """One pass; the number of jobs moved. The Lambda handler and the local platform both call this. Nothing
    while this Region is not confirmed home (issue 39, onward.runtime.authority)."""
    if not authority.is_home(store):
        return 0
    moved = store.reap()
    for job in moved:
        logger.info("lease expired", extra={"job_id": job.job_id, "attempt": job.attempt,
                                            "state": job.state.value, "version": job.version})
    return len(moved)
