"""The matcher's cache of each tenant's webhook endpoints: a tenant's list is read at most once per `ttl_ms`
(ONWARD_WEBHOOK_ENDPOINT_CACHE_S, 5 s by default) instead of on every stream batch, so the matcher's reads
follow the tenants with events, not the batches.

What the staleness allows: an endpoint registered is matched from at most `ttl_ms` after it was registered
(events before then are not its own); an endpoint deleted may still be matched for `ttl_ms`, but it never
receives an event for that: the deliverer reads the endpoint again, consistently, before each send
(onward.pipeline.webhooks.deliverer) and records a delivery to a deleted one as failed ("endpoint deleted")
without calling its URL. A rotated secret is read by the deliverer at send time too."""

from __future__ import annotations

import threading

from onward.domain.clock import Clock, EpochMs, system_clock
from onward.domain.webhooks import Webhook
from onward.store.webhooks import WebhookRecorder

DEFAULT_ENDPOINT_CACHE_S = 5.0


class EndpointCache:
    """`store.of_tenant(tenant_id)` answered from memory while its answer is younger than `ttl_ms` (0: never
    cached)."""

    def __init__(self, store: WebhookRecorder, ttl_ms: int, clock: Clock = system_clock) -> None:
        self._store = store
        self._ttl_ms = ttl_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: dict[str, tuple[EpochMs, list[Webhook]]] = {}
        self.reads = 0  # reads of the store (a test's and a bench's figure)

    def of_tenant(self, tenant_id: str) -> list[Webhook]:
        now = self._clock()
        with self._lock:
            found = self._cached.get(tenant_id)
            if found is not None and now - found[0] < self._ttl_ms:
                return found[1]
        endpoints = self._store.of_tenant(tenant_id)
        with self._lock:
            self.reads += 1
            if self._ttl_ms > 0:
                self._cached[tenant_id] = (now, endpoints)
                self._forget_expired(now)
        return endpoints

    def _forget_expired(self, now: EpochMs) -> None:
        """Drop what expired, so a tenant seen once does not stay in memory (under the lock)."""
        expired = [tenant for tenant, (read_at, _) in self._cached.items() if now - read_at >= self._ttl_ms]
        for tenant in expired:
            del self._cached[tenant]
