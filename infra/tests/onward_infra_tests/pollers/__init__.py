"""Tests of the local event-source pollers (onward_infra/pollers/): reading GetRecords answers raw, and
shards polled concurrently."""
