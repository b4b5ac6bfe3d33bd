"""The pipeline on the embedded endpoint: heartbeats, the projector, poison input, freshness over sharded
streams and retention."""
