"""The job store: the service every entry point writes through (JobStore), its ports, the claim,
tenants and schedules; `dynamo/` and `memory/` are its two adapters."""
