"""The /rate-limits routes over HTTP on the embedded endpoint, every answer held to the OpenAPI document
(documented_client.Client): a limit set, read, listed and deleted; refusals naming the field; tenant scoping
(another tenant never sees or deletes it; an operator names the tenant); and `rate_limit_key` on POST /jobs.

Without the routes' tenant (rate_limit_tenant) a tenant would set another's limits; without key_problem a
`type:` key naming no job type would be stored and never apply."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.api.test_api import OPERATOR, TOKENS
from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client

ACME, GLOBEX = TOKENS["acme"], TOKENS["globex"]


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


def test_a_limit_is_set_read_listed_and_deleted_per_tenant(client: Client) -> None:
    made = client.call("PUT", "/rate-limits/type:demo.echo", token=ACME, body={"limit": 5, "period_s": 2})
    assert made.status == 200 and (made.body["key"], made.body["limit"], made.body["period_s"]) == (
        "type:demo.echo", 5, 2.0)
    assert client.call("PUT", "/rate-limits/mail", token=ACME, body={"limit": 1, "period_s": 0.5}).status == 200
    assert [limit["key"] for limit in client.call("GET", "/rate-limits", token=ACME).body["rate_limits"]] == [
        "mail", "type:demo.echo"]
    assert client.call("GET", "/rate-limits/mail", token=ACME).body["period_s"] == 0.5
    assert client.call("GET", "/rate-limits/mail", token=GLOBEX).status == 404
    assert client.call("DELETE", "/rate-limits/mail", token=GLOBEX).status == 404
    assert client.call("GET", "/rate-limits", token=GLOBEX).body["rate_limits"] == []
    assert client.call("GET", "/rate-limits?tenant=acme", token=OPERATOR).body["rate_limits"][0]["key"] == "mail"
    assert client.call("GET", "/rate-limits", token=OPERATOR).status == 400  # an operator names the tenant
    assert client.call("DELETE", "/rate-limits/mail", token=ACME).status == 204
    assert client.call("GET", "/rate-limits/mail", token=ACME).status == 404


def test_bad_limits_and_keys_are_refused_naming_the_field(client: Client) -> None:
    for body, field in (({"limit": 0, "period_s": 1}, "limit"), ({"limit": 1, "period_s": 0}, "period_s"),
                        ({"limit": "3", "period_s": 1}, "limit"), ({"limit": 1, "period_s": 1, "x": 1}, "x")):
        refused = client.call("PUT", "/rate-limits/k", token=ACME, body=body)
        assert refused.status == 422 and refused.body["errors"][0]["loc"][-1] == field, (body, refused.body)
    refused = client.call("PUT", "/rate-limits/type:Not.A.Type", token=ACME, body={"limit": 1, "period_s": 1})
    assert refused.status == 422 and refused.body["errors"][0]["loc"] == ["path", "key"]
    job = client.call("POST", "/jobs", token=ACME, body={"type": "demo.echo", "rate_limit_key": "type:demo.echo"})
    assert job.status == 422 and job.body["errors"][0]["loc"][-1] == "rate_limit_key"
    assert client.call("POST", "/jobs", token=ACME, body={"type": "demo.echo", "rate_limit_key": "mail"}).status == 202
    assert client.call("GET", "/rate-limits", token=ACME).body["rate_limits"] == []  # nothing refused was stored
