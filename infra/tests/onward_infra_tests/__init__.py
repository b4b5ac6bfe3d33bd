"""The local stand-in for AWS's own tests (infra/onward_infra), mirroring its tree: the endpoint, moto_fixes/,
lean_client/, pollers, gateway, environments, metering; a package name of its own beside the product's `tests`."""
