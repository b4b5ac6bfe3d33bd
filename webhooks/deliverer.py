"""The webhook deliverer's function (WebhookDelivererFunction): WebhookDeliveriesQueue -> signed POSTs
(onward.entrypoints.webhooks)."""

from onward.entrypoints.webhooks import deliver_handler as handler

__all__ = ["handler"]
