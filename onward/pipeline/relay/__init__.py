"""The relay: committed outbox events (the outbox table's stream) -> the events stream (Kinesis), and
replay and reconcile, which re-publish retained events."""
