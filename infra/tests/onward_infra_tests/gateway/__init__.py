"""Tests of the local API Gateway stand-in (onward_infra/gateway.py): hostile HTTP, odd methods and codings,
over raw sockets (raw_http.py)."""
