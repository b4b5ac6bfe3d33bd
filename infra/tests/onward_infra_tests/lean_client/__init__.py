"""Tests of the lean client (onward_infra/lean_client/): its transport, codec and calls send and read what
botocore would, unit by unit and against the embedded endpoint."""
