"""The HTTP API's function (template.yaml's ApiFunction): API Gateway's HTTP API events -> the
routes of onward.api."""

from onward.api.app import handler

__all__ = ["handler"]
