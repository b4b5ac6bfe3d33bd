"""What more than one area of routes asks of the core: the view's lag now, the claims of the last window, the one
replay path, and the deployment's job types."""

from __future__ import annotations

from onward.api.answers import Problem
from onward.api.contract.jobs import Accepted
from onward.bootstrap import Deployment
from onward.domain.clock import EpochMs
from onward.domain.freshness import view_lag
from onward.domain.models import ViewLag
from onward.operator.claim_history import ClaimCounts
from onward.pipeline.checkpoints import PROJECTOR_CONSUMER
from onward.store.service import JobStore

CLAIM_WINDOW_S = 300
CLAIM_BUCKET_S = 60


def view_lag_now(deployment: Deployment, now: EpochMs) -> ViewLag:
    """How far behind the view may be now: one Query of the projector's watermarks, over every open shard
    of the events stream (listed at most every 30 s)."""
    return view_lag(deployment.checkpoint_store.watermarks(PROJECTOR_CONSUMER), now,
                    deployment.settings.stale_after_s, shards=deployment.events_shards.open_shards(),
                    replication=deployment.replication_status.current())  # after a failover (issue 39)


def recent_claims(deployment: Deployment, now: EpochMs, tenant_id: str | None = None) -> ClaimCounts:
    """The claims of the last CLAIM_WINDOW_S, per CLAIM_BUCKET_S (onward.operator.claim_history): every tenant's,
    or `tenant_id`'s only."""
    return deployment.recent_claims.count(now, window_s=CLAIM_WINDOW_S, bucket_s=CLAIM_BUCKET_S, tenant_id=tenant_id)


def replay_in_scope(store: JobStore, job_id: str, scope: str | None) -> Accepted:
    """The one replay path (a job's route and the operator's by id): a job outside `scope` is JobNotFound."""
    store.get(job_id, scope)  # bound to a tenant: only that tenant's jobs
    job = store.replay(job_id)
    return Accepted(job_id=job.job_id, status=job.state, version=job.version)


def refuse_unknown_job_type(deployment: Deployment, job_type: str) -> None:
    """A 422 naming the known types, for a job type the deployment does not run."""
    if job_type not in deployment.job_types:
        raise Problem(422, "Unknown job type", f"no job type {job_type!r}; known: "
                      + ", ".join(sorted(deployment.job_types)), slug="unknown-job-type")
