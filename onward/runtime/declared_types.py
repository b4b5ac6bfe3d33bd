"""A worker's job types published to the store when it starts (issue 37): each type's retry policy, so the
API fills a job's max_attempts from it and `explain`, GET /types and the page show it (onward.store.job_types)."""

from __future__ import annotations

import os
import socket

from aws_lambda_powertools import Logger

from onward.domain.retry_policy import JobTypeDeclaration
from onward.runtime.worker import Registry
from onward.store.service import JobStore

logger = Logger(service="onward-worker")


def declarer_id() -> str:
    """Who declares: this process, as `<host>:<pid>`."""
    return f"{socket.gethostname()}:{os.getpid()}"


def declare_types(store: JobStore, registry: Registry) -> list[JobTypeDeclaration]:
    """Publish every registered type with its retry policy (the last declaration of a type wins). A failure is
    logged, never raised: the workers run under their own policies all the same, and the API shows the previous
    declaration (or the platform's defaults) until a worker declares again."""
    try:
        return store.type_catalog.declare(((name, registry.policy(name)) for name in registry.types), declarer_id())
    except Exception:
        logger.exception("could not publish the job types' retry policies", extra={"types": sorted(registry.types)})
        return []
