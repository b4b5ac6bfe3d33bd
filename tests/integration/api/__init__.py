"""The HTTP API over real HTTP on the embedded stack: routes, input, security, fuzzing, every answer held
to the OpenAPI document."""
