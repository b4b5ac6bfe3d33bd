"""A lean boto3 client for the embedded endpoint: transport, codec and calls without botocore's
per-call machinery. Plugged in from outside the product (ONWARD_CLIENT_WRAPPER)."""
