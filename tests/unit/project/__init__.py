"""Checks over the whole repository: import contracts, lint and types, the docs' links and routes, and
template.yaml (lint, alarms, identity, roles against the code)."""
