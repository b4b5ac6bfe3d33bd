"""The webhooks' components of one deployment, built together (onward.bootstrap's `webhooks` component, or a
test's own over the memory store and queue): the store of endpoints and deliveries, the delivery queue, the
matcher and the deliverer, from WebhookSettings."""

from __future__ import annotations

import functools
from collections.abc import Callable

from onward.domain.clock import Clock, system_clock
from onward.pipeline.webhooks.config import WebhookSettings
from onward.pipeline.webhooks.deliverer import Deliverer, Sender
from onward.pipeline.webhooks.matcher import WebhookMatcher
from onward.pipeline.webhooks.queue import DeliveryQueue
from onward.pipeline.webhooks.sender import HttpSender
from onward.store.webhooks import WebhookRecorder


class WebhookParts:
    def __init__(self, settings: WebhookSettings, store: WebhookRecorder, queue: Callable[[], DeliveryQueue],
                 *, sender: Sender | None = None, clock: Clock = system_clock) -> None:
        self.settings = settings
        self.store = store
        self._queue = queue
        self._sender = sender
        self.clock = clock

    @functools.cached_property
    def queue(self) -> DeliveryQueue:
        return self._queue()

    @functools.cached_property
    def matcher(self) -> WebhookMatcher:
        return WebhookMatcher(self.store, self.queue, self.settings.policy, self.clock,
                              endpoint_cache_ms=round(self.settings.endpoint_cache_s * 1000))

    @functools.cached_property
    def deliverer(self) -> Deliverer:
        sender = self._sender or HttpSender(self.settings.rules, self.settings.timeout_s)
        return Deliverer(self.store, sender, self.settings.policy, self.clock, self.settings.slots_per_endpoint)
