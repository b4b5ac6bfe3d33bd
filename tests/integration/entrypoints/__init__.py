"""The Lambda handlers fed the event shapes their sources send, and the metrics they print for the
alarms."""
