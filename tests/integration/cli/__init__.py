"""The `onward` command against the embedded stack: overlaps, replay, rebuild-view and reconcile."""
