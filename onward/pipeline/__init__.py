"""The event pipeline: the outbox, the relay (outbox stream -> Kinesis), the projector (Kinesis -> status
view), heartbeats, checkpoints, parking, shard listings and the view reader."""
