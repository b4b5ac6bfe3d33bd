"""The webhook deliverer's function (WebhookDelivererFunction): WebhookDeliveriesQueue -> signed POSTs
(onward.entrypoints.webhook_deliverer)."""

from onward.entrypoints.webhook_deliverer import handler

__all__ = ["handler"]
