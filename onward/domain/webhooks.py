"""Completion webhooks, pure: a tenant's endpoint and what it asks for, which events match it, one delivery
and its body, the signature (`Onward-Signature: t=<unix s>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, as Stripe
signs), the retry schedule, and the URL rules (https; no private, loopback, link-local or metadata address
unless the deployment allows it). No I/O: resolving a host is the caller's (onward.pipeline.webhooks.addresses).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from onward.domain.clock import EpochMs
from onward.domain.models import OutboxEvent
from onward.domain.states import TERMINAL_STATES, JobState

ALL_EVENTS = "*"
# Named groups of statuses beside the job states themselves: "failed" ended with an error, "final" ended at all.
EVENT_GROUPS: dict[str, frozenset[str]] = {
    "failed": frozenset({JobState.DEAD.value, JobState.QUARANTINED.value}),
    "final": frozenset(state.value for state in TERMINAL_STATES),
}
EVENT_KINDS = frozenset({state.value for state in JobState} | set(EVENT_GROUPS) | {ALL_EVENTS})
MAX_URL_CHARS = 2048
MIN_SECRET_CHARS = 16
MAX_SECRET_CHARS = 256
MAX_WEBHOOKS_PER_TENANT = 25
SIGNATURE_HEADER = "Onward-Signature"
DELIVERY_HEADER = "Onward-Delivery"
SIGNATURE_TOLERANCE_S = 300  # how old a signed timestamp a receiver accepts (replays of older bodies refused)

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class NewWebhook(BaseModel):
    """POST /webhooks's body: where to deliver, which events (job statuses, or "*"), and the shared secret
    deliveries are signed with (write-only: never answered)."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=MAX_URL_CHARS,
                     description="https URL the deliveries are POSTed to (http and private addresses only where "
                                 "the deployment allows them, as `onward up` allows http://127.0.0.1)")
    events: list[str] = Field(min_length=1, max_length=len(EVENT_KINDS),
                              description='which events to deliver: job states ("succeeded", "cancelled", "dead"...), '
                                          '"failed" (dead or quarantined), "final" (any end), or "*" (every event)')
    secret: str = Field(min_length=MIN_SECRET_CHARS, max_length=MAX_SECRET_CHARS,
                        description="the HMAC-SHA256 key of Onward-Signature; write-only")

    @field_validator("events")
    @classmethod
    def _known_events(cls, events: list[str]) -> list[str]:
        unknown = sorted(set(events) - EVENT_KINDS)
        if unknown:
            raise ValueError(f"unknown event kinds {unknown}: use {sorted(EVENT_KINDS)}")
        return sorted(set(events))


class Webhook(BaseModel):
    """A tenant's registered endpoint."""

    model_config = ConfigDict(frozen=True)

    webhook_id: str
    tenant_id: str
    url: str
    kinds: tuple[str, ...]  # the event kinds it asked for (POST /webhooks's `events`)
    secret: str
    created_at: EpochMs

    def wants(self, status: str) -> bool:
        return any(kind in (ALL_EVENTS, status) or status in EVENT_GROUPS.get(kind, ()) for kind in self.kinds)


class DeliveryState(StrEnum):
    PENDING = "pending"  # recorded, to be sent (or sent again after its next_attempt_at)
    DELIVERED = "delivered"  # the endpoint answered 2xx
    FAILED = "failed"  # retried until give_up_at without a 2xx, or the endpoint was deleted; redeliver to retry


class Delivery(BaseModel):
    """One event for one endpoint. Its id is derived from the endpoint and the event, so recording the same
    event twice (a redelivered stream batch) finds the delivery already there."""

    model_config = ConfigDict(frozen=True)

    delivery_id: str
    webhook_id: str
    tenant_id: str
    job_id: str
    version: int
    status: str
    event_id: str
    payload: dict[str, Any]  # the body's event fields (delivery_body)
    created_at: EpochMs
    state: DeliveryState = DeliveryState.PENDING
    attempts: int = 0  # sends tried plus redeliveries asked: the guard of every update (a stale one is refused)
    next_attempt_at: EpochMs = 0
    give_up_at: EpochMs = 0
    last_error: str | None = None
    last_status_code: int | None = None
    delivered_at: EpochMs | None = None


def delivery_id_of(webhook_id: str, event_id: str) -> str:
    return hashlib.sha256(f"{webhook_id}\n{event_id}".encode()).hexdigest()[:32]


def payload_of(event: OutboxEvent) -> dict[str, Any]:
    """What a receiver needs to act and to drop a stale or duplicate delivery: the job, its version (newer
    wins), the status, the event's id and when the transition happened."""
    payload: dict[str, Any] = {"event_id": event.event_id, "job_id": event.job_id, "tenant_id": event.tenant_id,
                               "type": event.type, "version": event.version, "status": event.status.value,
                               "attempt": event.attempt, "occurred_at": event.occurred_at}
    if event.error is not None:
        payload["error"] = event.error.model_dump(mode="json")
    return payload


def deliveries_for(event: OutboxEvent, webhooks: Iterable[Webhook], now: EpochMs,
                   policy: RetryPolicy) -> list[Delivery]:
    """One pending delivery per endpoint of the event's tenant that wants its status."""
    return [Delivery(delivery_id=delivery_id_of(hook.webhook_id, event.event_id), webhook_id=hook.webhook_id,
                     tenant_id=event.tenant_id, job_id=event.job_id, version=event.version,
                     status=event.status.value, event_id=event.event_id, payload=payload_of(event), created_at=now,
                     next_attempt_at=now, give_up_at=now + policy.give_up_after_ms)
            for hook in webhooks if hook.tenant_id == event.tenant_id and hook.wants(event.status.value)]


def delivery_body(delivery: Delivery) -> bytes:
    """The JSON body POSTed: the event's fields and the delivery's id, compact, keys sorted."""
    body = {**delivery.payload, "delivery_id": delivery.delivery_id, "webhook_id": delivery.webhook_id}
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def signature(secret: str, timestamp_s: int, body: bytes) -> str:
    """The Onward-Signature header's value: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`."""
    digest = hmac.new(secret.encode(), f"{timestamp_s}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp_s},v1={digest}"


def signature_is_valid(secret: str, header: str, body: bytes, now_s: float,
                       tolerance_s: float = SIGNATURE_TOLERANCE_S) -> bool:
    """A receiver's check: the header parses, its timestamp is within `tolerance_s` of now, and one of its v1
    values is the HMAC of "<t>.<body>" (compared in constant time)."""
    parts = [part.split("=", 1) for part in header.split(",") if "=" in part]
    stamps = [value for name, value in parts if name.strip() == "t"]
    if len(stamps) != 1 or not stamps[0].isdigit() or abs(now_s - int(stamps[0])) > tolerance_s:
        return False
    expected = signature(secret, int(stamps[0]), body).split("v1=", 1)[1]
    return any(hmac.compare_digest(expected, value) for name, value in parts if name.strip() == "v1")


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter: the n-th retry waits between half and all of first_delay * 2**(n-1),
    capped at max_delay; a delivery is given up (failed) once the next try would fall after give_up_after."""

    first_delay_s: float = 10.0
    max_delay_s: float = 3600.0
    give_up_after_s: float = 86_400.0

    def __post_init__(self) -> None:
        if not 0 < self.first_delay_s <= self.max_delay_s or self.give_up_after_s <= 0:
            raise ValueError("webhook retries need 0 < first delay <= max delay and a positive give-up time")

    @property
    def give_up_after_ms(self) -> int:
        return int(self.give_up_after_s * 1000)

    def delay_ms(self, attempts: int, rng: random.Random | None = None) -> int:
        """The wait before the next try after `attempts` failed sends."""
        ceiling = min(self.max_delay_s, self.first_delay_s * 2 ** max(0, attempts - 1))
        return int((rng or random).uniform(ceiling / 2, ceiling) * 1000)


DEFAULT_RETRY_POLICY = RetryPolicy()


class UnsafeWebhookUrl(ValueError):
    """A URL deliveries may not go to; the message says why."""


@dataclass(frozen=True)
class UrlRules:
    """What a webhook URL may be. On AWS: https, every address the host resolves to global (none private,
    loopback, link-local, metadata, shared or reserved). `allowed_networks` (a deployment's explicit setting,
    ONWARD_WEBHOOK_ALLOWED_NETWORKS; `onward up` allows 127.0.0.1) lifts both rules for addresses inside them."""

    allowed_networks: tuple[Network, ...] = ()

    @classmethod
    def of(cls, networks: Sequence[str]) -> UrlRules:
        try:
            return cls(tuple(ipaddress.ip_network(text.strip()) for text in networks if text.strip()))
        except ValueError as error:
            raise ValueError(f"ONWARD_WEBHOOK_ALLOWED_NETWORKS: {error}") from error

    def host_of(self, url: str) -> tuple[str, int]:
        """The URL's host and port, once its shape is acceptable (http(s), a host, no credentials)."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as error:
            raise UnsafeWebhookUrl(f"not a URL: {error}") from error
        if parts.scheme not in ("https", "http"):
            raise UnsafeWebhookUrl("the URL must be https")
        if not parts.hostname:
            raise UnsafeWebhookUrl("the URL has no host")
        if parts.username is not None or parts.password is not None:
            raise UnsafeWebhookUrl("the URL may not carry credentials (sign with the secret instead)")
        if parts.fragment:
            raise UnsafeWebhookUrl("the URL may not have a #fragment")
        return parts.hostname, port or (443 if parts.scheme == "https" else 80)

    def check(self, url: str, addresses: Sequence[str]) -> list[Address]:
        """The addresses deliveries to `url` may connect to (every one the host resolved to must pass);
        UnsafeWebhookUrl otherwise."""
        if not addresses:
            raise UnsafeWebhookUrl("the URL's host resolves to no address")
        https = urlsplit(url).scheme == "https"
        checked: list[Address] = []
        for text in addresses:
            address = ipaddress.ip_address(text.split("%", 1)[0])
            if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
                address = address.ipv4_mapped
            allowed = any(address in network for network in self.allowed_networks)
            if not allowed and not address.is_global:
                raise UnsafeWebhookUrl(f"the URL's host resolves to {address}, a private, loopback, link-local, "
                                       "metadata or reserved address")
            if not allowed and not https:
                raise UnsafeWebhookUrl("the URL must be https")
            checked.append(address)
        return checked
