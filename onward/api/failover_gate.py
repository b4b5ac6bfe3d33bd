"""The new home answers writes 503 until its adoption is done (issue 39's gaps; docs/regional-recovery.md "How
it is fenced", step 3): from the moment `onward failover` raises this Region's epoch item until it records the
adoption and the counters' rebuild done (`adopted_at`), every request that writes (any method but GET, HEAD and
OPTIONS) is refused with a problem naming the failover and a Retry-After; reads answer as always, and
`GET /health` says `writes: refused`.

The epoch item is read at most once per EPOCH_CACHE_S per process (onward.store.region_epoch_cache), never per
request: the 503s begin up to that long after the raise (a write accepted meanwhile is of the old epoch or the
new, and either is adopted or is the new home's own) and end up to that long after the adoption. Only a
deployment of several Regions (ONWARD_WITNESS set: the same condition as the authority lease's) reads it.
"""

from __future__ import annotations

from onward.api.answers import Problem
from onward.bootstrap import Deployment
from onward.domain.regions import WritesRefused, writes_refused
from onward.settings import AuthoritySettings, several_regions
from onward.store.region_epoch_cache import cached_region_epoch, epoch_cache_s

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
RETRY_AFTER_S = 10  # an adoption takes 1-2 minutes on AWS (docs/regional-recovery.md: RPO and RTO)


def refusal_now(deployment: Deployment) -> WritesRefused | None:
    """Why this deployment's API refuses writes now (None: it accepts them)."""
    if not several_regions(deployment.environ):
        return None
    cache = cached_region_epoch(deployment.job_store,
                                epoch_cache_s(AuthoritySettings.from_environment(deployment.environ).check_s))
    return writes_refused(cache.current(), deployment.settings.region)


def refuse_writes_while_adopting(method: str, deployment: Deployment) -> None:
    """503 with Retry-After when `method` writes and this Region's adoption after a failover is not done."""
    if method.upper() in READ_METHODS:
        return
    refused = refusal_now(deployment)
    if refused is not None:
        raise Problem(503, "Failover in progress", refused.detail(), slug="failover-in-progress",
                      headers={"Retry-After": str(RETRY_AFTER_S)})
