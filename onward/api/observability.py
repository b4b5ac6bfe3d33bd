"""The HTTP API's logger, metrics and tracer: one of each, shared by the handler (onward/api/app.py) and the
routes. Tokens are never logged (the event is not logged at all)."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger(service="onward-api")
metrics = Metrics(namespace="Onward", service="api")
tracer = Tracer(service="onward-api")
