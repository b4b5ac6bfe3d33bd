"""The HTTP API: routes, who is calling, the request and answer contract, and the OpenAPI document."""
