"""The /webhooks routes over HTTP on the embedded endpoint, every answer held to the OpenAPI document
(documented_client.Client): registration with its refusals naming the field, the write-only secret, tenant scoping,
the deliveries listing and the redeliver's refusals."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.api.test_api import OPERATOR, TOKENS
from tests.integration.api_support import serve_api
from tests.integration.documented_client import Client

SECRET = "whsec-0123456789abcdef"
ACME, GLOBEX = TOKENS["acme"], TOKENS["globex"]


@pytest.fixture
def client(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    monkeypatch.setenv("ONWARD_WEBHOOK_ALLOWED_NETWORKS", "127.0.0.1/32")
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield Client(url)


def test_a_webhook_is_registered_listed_read_and_deleted_without_its_secret(client: Client) -> None:
    """Catches the secret in any answer, another tenant seeing or deleting the endpoint, and a delete that
    leaves it listed."""
    made = client.call("POST", "/webhooks", token=ACME,
                       body={"url": "http://127.0.0.1:9/hooks", "events": ["succeeded", "failed"], "secret": SECRET})
    assert made.status == 201 and "secret" not in made.body
    webhook_id = made.body["webhook_id"]
    assert made.body["events"] == ["failed", "succeeded"]
    listed = client.call("GET", "/webhooks", token=ACME)
    assert [hook["webhook_id"] for hook in listed.body["webhooks"]] == [webhook_id]
    assert SECRET not in str(listed.body) and SECRET not in str(client.call("GET", f"/webhooks/{webhook_id}",
                                                                            token=ACME).body)
    assert client.call("GET", "/webhooks", token=GLOBEX).body["webhooks"] == []
    assert client.call("GET", f"/webhooks/{webhook_id}", token=GLOBEX).status == 404
    assert client.call("DELETE", f"/webhooks/{webhook_id}", token=GLOBEX).status == 404
    assert client.call("GET", f"/webhooks/{webhook_id}/deliveries", token=ACME).body == {"deliveries": []}
    assert client.call("DELETE", f"/webhooks/{webhook_id}", token=ACME).status == 204
    assert client.call("GET", f"/webhooks/{webhook_id}", token=ACME).status == 404


@pytest.mark.parametrize(("url", "why"), [
    ("http://10.0.0.8/hooks", "private"),
    ("https://169.254.169.254/latest/meta-data", "link-local"),
    ("https://[::1]:8443/x", "loopback"),
    ("https://user:pw@example.com/x", "credentials"),
    ("ftp://example.com/x", "https"),
    ("https://no-such-host.invalid/x", "resolves to no address"),
])
def test_a_url_deliveries_may_not_go_to_is_refused_naming_the_url(client: Client, url: str, why: str) -> None:
    """Catches an SSRF target accepted at registration (private, link-local metadata, loopback outside the
    allowed network), and a refusal that does not name the field."""
    refused = client.call("POST", "/webhooks", token=ACME, body={"url": url, "events": ["*"], "secret": SECRET})
    assert refused.status == 422
    assert refused.body["errors"][0]["loc"] == ["url"] and why in refused.body["errors"][0]["msg"]
    assert client.call("GET", "/webhooks", token=ACME).body["webhooks"] == []


def test_bad_events_and_short_secrets_are_refused_naming_their_field(client: Client) -> None:
    """Catches a body stored although its events or secret could never work."""
    for body, field in (({"url": "http://127.0.0.1:9/", "events": ["done"], "secret": SECRET}, "events"),
                        ({"url": "http://127.0.0.1:9/", "events": ["*"], "secret": "short"}, "secret")):
        refused = client.call("POST", "/webhooks", token=ACME, body=body)
        assert refused.status == 422 and refused.body["errors"][0]["loc"][0] == field


def test_redeliver_refuses_a_missing_delivery(client: Client) -> None:
    """Catches a redeliver of a delivery that does not exist, or of another tenant's endpoint."""
    webhook_id = client.call("POST", "/webhooks", token=ACME, body={
        "url": "http://127.0.0.1:9/hooks", "events": ["*"], "secret": SECRET}).body["webhook_id"]
    path = f"/webhooks/{webhook_id}/deliveries/{'0' * 32}/redeliver"
    assert client.call("POST", path, token=ACME).status == 404
    assert client.call("POST", path, token=GLOBEX).status == 404
