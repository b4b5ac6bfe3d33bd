"""The reaper: on a schedule, hands jobs whose lease lapsed back to the queue (or to quarantine)."""

from __future__ import annotations

import threading

from aws_lambda_powertools import Logger

from onward.store import JobStore

logger = Logger(service="onward-reaper")


def reap_once(store: JobStore) -> int:
    """One pass; the number of jobs moved. The Lambda handler and the local loop both call this."""
    moved = store.reap()
    for job in moved:
        logger.info("lease expired", extra={"job_id": job.job_id, "attempt": job.attempt,
                                            "state": job.state.value, "version": job.version})
    return len(moved)


def run_reaper(store: JobStore, interval_s: float, stop: threading.Event) -> None:
    """Reap every `interval_s` until `stop` is set."""
    while not stop.wait(interval_s):
        try:
            reap_once(store)
        except Exception:  # noqa: BLE001 - the next pass retries
            logger.exception("reaper pass failed")
