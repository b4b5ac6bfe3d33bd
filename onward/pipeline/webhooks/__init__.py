"""Completion webhooks: the matcher (a consumer of the events stream that records deliveries and queues them),
the delivery queue, and the deliverer that signs and sends them (docs/webhooks.md)."""
