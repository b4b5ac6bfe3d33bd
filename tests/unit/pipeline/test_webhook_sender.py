"""The webhook sender (onward/pipeline/webhooks/sender.py): the address is checked at the moment of sending and
the connection goes to that very address, with the URL's host in the Host header."""

from __future__ import annotations

import time

from onward.domain.webhooks import UrlRules, signature
from onward.pipeline.webhooks.sender import HttpSender
from onward.testing.webhook_receiver import WebhookReceiver

SECRET = "whsec-0123456789abcdef"


def test_a_host_that_now_resolves_to_a_private_address_is_refused_without_connecting() -> None:
    """Catches DNS rebinding: a name checked at registration that resolves to the metadata address at the time
    of sending must not be connected to (the check is made again at every send, on every address)."""
    asked: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["93.184.215.14", "169.254.169.254"]

    outcome = HttpSender(UrlRules(), resolver=rebinding).send("https://hooks.example.com/x", b"{}", {})
    assert not outcome.delivered and outcome.error is not None and "169.254.169.254" in outcome.error
    assert asked == ["hooks.example.com"]


def test_the_connection_goes_to_the_checked_address_with_the_urls_host() -> None:
    """Catches a second lookup between check and connect (the sender must connect to the address it checked:
    here the name exists only in the test's resolver), and a Host header that is not the URL's."""
    with WebhookReceiver(SECRET) as receiver:
        port = int(receiver.url.rsplit(":", 1)[1].split("/", 1)[0])
        sender = HttpSender(UrlRules.of(["127.0.0.1/32"]), timeout_s=5,
                            resolver=lambda host, _: ["127.0.0.1"] if host == "hooks.invalid" else [])
        body = b'{"job_id":"j","version":1}'
        outcome = sender.send(f"http://hooks.invalid:{port}/hooks", body,
                              {"Onward-Signature": signature(SECRET, int(time.time()), body), "Onward-Delivery": "d1"})
        assert outcome.delivered and outcome.status_code == 204
        (got,) = receiver.received
        assert got.signature_valid and got.delivery_id == "d1" and got.host == f"hooks.invalid:{port}"
