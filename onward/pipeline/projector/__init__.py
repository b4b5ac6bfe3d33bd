"""The projector: events -> the status view, guarded by version; and the view rebuilt from the
outbox."""
