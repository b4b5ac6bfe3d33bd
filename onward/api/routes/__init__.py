"""The HTTP API's routes, one Powertools router per area: jobs, schedules, the operator's (/ops/...), the status
page, and the API's own (health, the caller, the view's lag, the OpenAPI document). onward/api/app.py includes
each router in the resolver."""
