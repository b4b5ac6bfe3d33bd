"""The webhook matcher's function (WebhookMatcherFunction): the events stream -> recorded and queued deliveries
(onward.entrypoints.webhooks)."""

from onward.entrypoints.webhooks import match_handler as handler

__all__ = ["handler"]
