"""The webhook matcher's function (WebhookMatcherFunction): the events stream -> recorded and queued deliveries
(onward.entrypoints.webhook_matcher)."""

from onward.entrypoints.webhook_matcher import handler

__all__ = ["handler"]
