"""Maintenance passes on the embedded endpoint: the backlog metric and periodic jobs (the Scheduler and its
Lambda handler)."""
