"""The webhooks' SAM function folder: template.yaml's WebhookMatcherFunction Handler is webhooks.matcher.handler,
WebhookDelivererFunction's webhooks.deliverer.handler."""
