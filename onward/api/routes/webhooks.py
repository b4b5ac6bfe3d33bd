"""The webhook routes (/webhooks): a tenant's completion webhooks (onward.domain.webhooks, delivered by
onward.pipeline.webhooks): registered, listed, read, deleted; their recent deliveries, and a redeliver."""

from __future__ import annotations

import secrets
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.openapi.params import Path

from onward.api.answers import NO_STORE, Problem, json_answer
from onward.api.contract.webhooks import Deliveries, DeliveryInfo, WebhookInfo, Webhooks
from onward.api.openapi import NOT_JSON, SECURED, ok, problem, secured
from onward.api.request import AskedTenant, asked_tenant, caller, field_errors, tenant_scope
from onward.api.routing import new_router
from onward.bootstrap import ApiDeployment
from onward.domain.clock import system_clock
from onward.domain.text_patterns import DELIVERY_ID, WEBHOOK_ID
from onward.domain.webhooks import MAX_WEBHOOKS_PER_TENANT, NewWebhook, UnsafeWebhookUrl, Webhook
from onward.pipeline.webhooks.deliverer import redeliver
from onward.pipeline.webhooks.sender import checked_addresses
from onward.store.webhooks import AddOutcome

router = new_router()

OTHER_TENANT = problem("a tenant's credential named another tenant")
CREATE_DESCRIPTION = (
    "Registers an endpoint: every later event of the tenant's jobs whose status `events` names is POSTed to `url` "
    "at least once, as JSON carrying job_id, version, status, event_id and occurred_at (keep the highest version "
    "per job; drop a delivery_id seen before), signed in `Onward-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 "
    "of \"<t>.<body>\" with the secret>`, with `Onward-Delivery: <delivery id>`. A send that gets no 2xx within "
    "the timeout is retried with exponential backoff and jitter until the deployment's give-up time, then "
    "recorded as failed (docs/webhooks.md). The URL must be https and resolve only to public addresses (checked "
    "now and at every send), unless the deployment allows a network explicitly.")


def webhook_tenant() -> str:
    """The tenant whose webhooks a request is about: the credential's, or the ?tenant= of an operator."""
    tenant = tenant_scope(caller(), asked_tenant())
    if tenant is None:
        raise Problem(400, "Bad request", "an operator names the tenant whose webhooks these are: pass ?tenant=")
    return tenant


def webhook_not_found(webhook_id: str) -> Problem:
    # another tenant's endpoint is answered exactly like a missing one
    return Problem(404, "Not found", f"no webhook {webhook_id!r}", slug="webhook-not-found")


def _webhook(tenant_id: str, webhook_id: str) -> Webhook:
    found = ApiDeployment.from_environment().webhooks.store.get(tenant_id, webhook_id)
    if found is None:
        raise webhook_not_found(webhook_id)
    return found


@router.post("/webhooks", operation_id="createWebhook", security=SECURED, description=CREATE_DESCRIPTION,
             responses=secured({
                 201: ok("the endpoint (without its secret)", WebhookInfo),
                 400: problem("malformed JSON, a bad ?tenant=, or an operator without ?tenant="),
                 403: OTHER_TENANT,
                 409: problem(f"the tenant has {MAX_WEBHOOKS_PER_TENANT} webhooks (delete one first)"),
                 415: NOT_JSON,
                 422: problem("unknown fields, a url that is not https or resolves to a private, loopback, "
                              "link-local or metadata address, unknown events, a secret under 16 characters; "
                              "`errors` lists each place and why")}))
def create_webhook(tenant_id: Annotated[str, Depends(webhook_tenant)], request: NewWebhook,
                   asked: AskedTenant = None) -> Response[str]:
    parts = ApiDeployment.from_environment().webhooks
    try:
        checked_addresses(parts.settings.rules, request.url)
    except UnsafeWebhookUrl as refusal:
        raise field_errors([{"loc": ("url",), "msg": str(refusal), "type": "unsafe_url"}]) from refusal
    body = request.model_dump()
    webhook = Webhook(webhook_id=f"wh_{secrets.token_hex(12)}", tenant_id=tenant_id, url=body["url"],
                      kinds=tuple(body["events"]), secret=body["secret"], created_at=system_clock())
    if parts.store.register(webhook) is AddOutcome.TOO_MANY:
        raise Problem(409, "Too many webhooks", f"a tenant keeps at most {MAX_WEBHOOKS_PER_TENANT} webhooks; delete "
                      "one first", slug="too-many-webhooks")
    return json_answer(201, WebhookInfo.of(webhook))


@router.get("/webhooks", operation_id="listWebhooks", security=SECURED, responses=secured({
    200: ok("the tenant's webhooks, oldest first", Webhooks),
    400: problem("a bad ?tenant=, or an operator without ?tenant="),
    403: OTHER_TENANT}))
def list_webhooks(tenant_id: Annotated[str, Depends(webhook_tenant)], asked: AskedTenant = None) -> Response[str]:
    found = ApiDeployment.from_environment().webhooks.store.of_tenant(tenant_id)
    return json_answer(200, Webhooks(webhooks=[WebhookInfo.of(webhook) for webhook in found]))


@router.get("/webhooks/<webhook_id>", operation_id="getWebhook", security=SECURED, responses=secured({
    200: ok("the webhook (without its secret)", WebhookInfo),
    400: problem("a bad ?tenant=, or an operator without ?tenant="),
    403: OTHER_TENANT,
    404: problem("no webhook of this id for this tenant")}))
def get_webhook(tenant_id: Annotated[str, Depends(webhook_tenant)],
                webhook_id: Annotated[str, Path(pattern=WEBHOOK_ID.anchored)],
                asked: AskedTenant = None) -> Response[str]:
    return json_answer(200, WebhookInfo.of(_webhook(tenant_id, webhook_id)))


@router.delete("/webhooks/<webhook_id>", operation_id="deleteWebhook", security=SECURED, responses=secured({
    204: {"description": "deleted: nothing more is sent to it (a pending delivery is recorded failed)"},
    400: problem("a bad ?tenant=, or an operator without ?tenant="),
    403: OTHER_TENANT,
    404: problem("no webhook of this id for this tenant")}))
def delete_webhook(tenant_id: Annotated[str, Depends(webhook_tenant)],
                   webhook_id: Annotated[str, Path(pattern=WEBHOOK_ID.anchored)],
                asked: AskedTenant = None) -> Response[str]:
    if not ApiDeployment.from_environment().webhooks.store.remove(tenant_id, webhook_id):
        raise webhook_not_found(webhook_id)
    return Response(204, None, None, headers=NO_STORE)


@router.get("/webhooks/<webhook_id>/deliveries", operation_id="listWebhookDeliveries", security=SECURED,
            responses=secured({
                200: ok("the webhook's recent deliveries, newest first, failed ones with their last error",
                        Deliveries),
                400: problem("a bad ?tenant=, or an operator without ?tenant="),
                403: OTHER_TENANT,
                404: problem("no webhook of this id for this tenant")}))
def list_deliveries(tenant_id: Annotated[str, Depends(webhook_tenant)],
                    webhook_id: Annotated[str, Path(pattern=WEBHOOK_ID.anchored)],
                asked: AskedTenant = None) -> Response[str]:
    webhook = _webhook(tenant_id, webhook_id)
    found = ApiDeployment.from_environment().webhooks.store.recent(webhook.webhook_id)
    return json_answer(200, Deliveries(deliveries=[DeliveryInfo.of(delivery) for delivery in found]))


@router.post("/webhooks/<webhook_id>/deliveries/<delivery_id>/redeliver", operation_id="redeliverWebhook",
             security=SECURED, responses=secured({
                 202: ok("the delivery, pending again with a fresh retry time, queued", DeliveryInfo),
                 400: problem("a bad ?tenant=, or an operator without ?tenant="),
                 403: OTHER_TENANT,
                 404: problem("no webhook of this id for this tenant, or no such delivery of it"),
                 409: problem("the delivery is pending already, or changed while this request ran")}))
def redeliver_webhook(tenant_id: Annotated[str, Depends(webhook_tenant)],
                      webhook_id: Annotated[str, Path(pattern=WEBHOOK_ID.anchored)],
                      delivery_id: Annotated[str, Path(pattern=DELIVERY_ID.anchored)],
                      asked: AskedTenant = None) -> Response[str]:
    parts = ApiDeployment.from_environment().webhooks
    webhook = _webhook(tenant_id, webhook_id)
    delivery = parts.store.delivery(webhook.webhook_id, delivery_id)
    if delivery is None:
        raise Problem(404, "Not found", f"no delivery {delivery_id!r} of webhook {webhook_id!r}",
                      slug="delivery-not-found")
    if delivery.state == "pending":
        raise Problem(409, "Delivery pending", "the delivery is pending already: it is sent at its next try",
                      slug="delivery-pending")
    again = redeliver(parts.store, parts.queue, delivery, parts.settings.policy, system_clock())
    if again is None:
        raise Problem(409, "Delivery changed", "the delivery changed while this request ran; read it again",
                      slug="delivery-changed")
    return json_answer(202, DeliveryInfo.of(again))
