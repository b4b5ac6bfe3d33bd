"""Maintenance passes that run on a schedule: the reaper (lapsed leases), the scheduler (periodic
jobs) and the backlog metric the workers scale on."""
