"""Operator reads on the embedded endpoint: the lag probe over the real telemetry."""
