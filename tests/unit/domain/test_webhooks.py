"""The pure rules of completion webhooks (onward.domain.webhooks): the signature, what an endpoint matches, the
retry schedule and the URL rules."""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from onward.domain.models import OutboxEvent
from onward.domain.states import JobState
from onward.domain.webhooks import (
    NewWebhook,
    RetryPolicy,
    UnsafeWebhookUrl,
    UrlRules,
    Webhook,
    deliveries_for,
    delivery_body,
    signature,
    signature_is_valid,
)

SECRET = "whsec-0123456789abcdef"
JOB = "0123456789abcdef0123456789abcdef"


def event(status: JobState, version: int = 3, tenant: str = "acme") -> OutboxEvent:
    return OutboxEvent(event_id=f"{JOB}:{version}", job_id=JOB, tenant_id=tenant, type="demo.echo", version=version,
                       status=status, attempt=1, occurred_at="2026-12-04T10:00:00.000Z")


def hook(events: tuple[str, ...], tenant: str = "acme", webhook_id: str = "wh_1") -> Webhook:
    return Webhook(webhook_id=webhook_id, tenant_id=tenant, url="https://example.com/h", kinds=events,
                   secret=SECRET, created_at=0)


def test_a_signature_verifies_only_with_its_secret_body_and_a_recent_timestamp() -> None:
    """Catches a signature over the body alone (a replayed old body would verify), a non-constant format, or a
    check that accepts another secret or a changed body."""
    body = b'{"job_id":"j1","version":3}'
    header = signature(SECRET, 1_800_000_000, body)
    assert header.startswith("t=1800000000,v1=") and len(header.split("v1=")[1]) == 64
    assert signature_is_valid(SECRET, header, body, now_s=1_800_000_010)
    assert not signature_is_valid("another-secret-000", header, body, now_s=1_800_000_010)
    assert not signature_is_valid(SECRET, header, body + b" ", now_s=1_800_000_010)
    assert not signature_is_valid(SECRET, header, body, now_s=1_800_000_000 + 301)  # too old: a replay
    assert not signature_is_valid(SECRET, "v1=" + header.split("v1=")[1], body, now_s=1_800_000_010)


def test_the_signature_is_hmac_sha256_of_timestamp_dot_body_as_the_issue_names_it() -> None:
    """Catches a drift from the documented scheme a receiver implements by hand."""
    import hashlib
    import hmac

    body = b"{}"
    expected = hmac.new(SECRET.encode(), b"1700000000." + body, hashlib.sha256).hexdigest()
    assert signature(SECRET, 1_700_000_000, body) == f"t=1700000000,v1={expected}"


def test_an_endpoint_gets_only_the_statuses_it_asked_for_and_only_its_tenants() -> None:
    """Catches a delivery of an unwanted status, of another tenant's job, or a group ("failed", "final", "*")
    that matches the wrong states."""
    policy = RetryPolicy()
    hooks = [hook(("succeeded",), webhook_id="a"), hook(("failed",), webhook_id="b"), hook(("*",), webhook_id="c"),
             hook(("final",), webhook_id="d"), hook(("*",), tenant="globex", webhook_id="e")]
    matched = {status: sorted(d.webhook_id for d in deliveries_for(event(status), hooks, 5, policy))
               for status in (JobState.SUCCEEDED, JobState.DEAD, JobState.QUARANTINED, JobState.RUNNING)}
    assert matched == {JobState.SUCCEEDED: ["a", "c", "d"], JobState.DEAD: ["b", "c", "d"],
                       JobState.QUARANTINED: ["b", "c", "d"], JobState.RUNNING: ["c"]}


def test_a_delivery_id_is_the_same_for_the_same_event_and_endpoint_and_its_body_carries_the_version() -> None:
    """Catches a redelivered stream batch recording a second delivery of the same event (its id must repeat),
    and a body without what a receiver needs to drop stale or duplicate deliveries."""
    first = deliveries_for(event(JobState.SUCCEEDED), [hook(("*",))], 5, RetryPolicy())[0]
    again = deliveries_for(event(JobState.SUCCEEDED), [hook(("*",))], 99, RetryPolicy())[0]
    newer = deliveries_for(event(JobState.SUCCEEDED, version=4), [hook(("*",))], 5, RetryPolicy())[0]
    assert first.delivery_id == again.delivery_id != newer.delivery_id
    body = delivery_body(first).decode()
    for field in (f'"job_id":"{JOB}"', '"version":3', '"status":"succeeded"', f'"event_id":"{JOB}:3"', '"occurred_at"',
                  f'"delivery_id":"{first.delivery_id}"'):
        assert field in body


def test_retry_delays_grow_with_jitter_and_stay_capped() -> None:
    """Catches retries without backoff (hammering a failing endpoint), without jitter (every delivery of an
    outage retrying in lockstep), or past the cap."""
    policy = RetryPolicy(first_delay_s=10, max_delay_s=100, give_up_after_s=1000)
    rng = random.Random(7)
    delays = [[policy.delay_ms(n, rng) for _ in range(50)] for n in (1, 2, 3, 10)]
    assert all(5_000 <= d <= 10_000 for d in delays[0]) and all(10_000 <= d <= 20_000 for d in delays[1])
    assert all(50_000 <= d <= 100_000 for d in delays[3])
    assert len(set(delays[2])) > 10  # jittered
    with pytest.raises(ValueError, match="first delay"):
        RetryPolicy(first_delay_s=10, max_delay_s=1)


@pytest.mark.parametrize("address", ["10.0.0.5", "192.168.1.1", "172.16.0.1", "127.0.0.1", "169.254.169.254",
                                     "100.64.0.1", "0.0.0.0", "::1", "fe80::1", "fd00:ec2::254", "::ffff:127.0.0.1",
                                     "::ffff:169.254.169.254"])
def test_private_loopback_link_local_and_metadata_addresses_are_refused(address: str) -> None:
    """Catches a webhook that could reach inside the deployment's network (SSRF), including through an
    IPv4-mapped IPv6 address or the IPv6 metadata endpoint."""
    with pytest.raises(UnsafeWebhookUrl):
        UrlRules().check("https://hooks.example.com/x", [address])


def test_every_resolved_address_must_pass_and_https_is_required_unless_allowed() -> None:
    """Catches a check of the first address only (a host answering one public and one private address), http
    accepted on AWS, and the local allowance leaking beyond its networks."""
    rules = UrlRules()
    assert [str(a) for a in rules.check("https://example.com/", ["93.184.215.14"])] == ["93.184.215.14"]
    with pytest.raises(UnsafeWebhookUrl):
        rules.check("https://example.com/", ["93.184.215.14", "10.1.2.3"])
    with pytest.raises(UnsafeWebhookUrl, match="https"):
        rules.check("http://example.com/", ["93.184.215.14"])
    with pytest.raises(UnsafeWebhookUrl):
        rules.check("https://example.com/", [])
    local = UrlRules.of(["127.0.0.1/32"])
    assert local.check("http://127.0.0.1:9000/h", ["127.0.0.1"])
    with pytest.raises(UnsafeWebhookUrl):
        local.check("http://10.0.0.1/h", ["10.0.0.1"])
    for bad in ("ftp://example.com/", "https://user:pw@example.com/", "https:///nohost", "https://example.com/#x"):
        with pytest.raises(UnsafeWebhookUrl):
            rules.host_of(bad)


def test_a_new_webhook_refuses_unknown_events_short_secrets_and_unknown_fields() -> None:
    """Catches a body the API would store although it could never be used as asked."""
    assert NewWebhook(url="https://e.com", events=["succeeded", "succeeded", "*"], secret=SECRET).events == [
        "*", "succeeded"]
    for body in ({"url": "https://e.com", "events": ["finished"], "secret": SECRET},
                 {"url": "https://e.com", "events": [], "secret": SECRET},
                 {"url": "https://e.com", "events": ["*"], "secret": "short"},
                 {"url": "https://e.com", "events": ["*"], "secret": SECRET, "extra": 1}):
        with pytest.raises(ValidationError):
            NewWebhook.model_validate(body)
