"""The webhooks' settings, read from the environment and validated at start (InvalidSetting names the variable):

- ONWARD_WEBHOOK_ALLOWED_NETWORKS: comma list of networks (e.g. `127.0.0.1/32`) a webhook URL may resolve to
  although private or loopback, and over http; unset on AWS, `onward up` sets 127.0.0.1/32 and ::1/128;
- ONWARD_WEBHOOK_TIMEOUT_S (5), ONWARD_WEBHOOK_SLOTS_PER_ENDPOINT (4): the sender's timeout, how many sends one
  endpoint may hold at once in one deliverer process;
- ONWARD_WEBHOOK_FIRST_RETRY_S (10), ONWARD_WEBHOOK_MAX_RETRY_S (3600), ONWARD_WEBHOOK_GIVE_UP_S (86400): the
  retry schedule (onward.domain.webhooks.RetryPolicy);
- ONWARD_WEBHOOK_ENDPOINT_CACHE_S (5; 0: no cache): how long the matcher keeps a tenant's endpoints
  (onward.pipeline.webhooks.endpoint_cache).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from onward.domain.webhooks import RetryPolicy, UrlRules
from onward.pipeline.webhooks.deliverer import DEFAULT_SLOTS_PER_ENDPOINT
from onward.pipeline.webhooks.endpoint_cache import DEFAULT_ENDPOINT_CACHE_S
from onward.pipeline.webhooks.sender import DEFAULT_TIMEOUT_S
from onward.settings import InvalidSetting, number_setting


@dataclass(frozen=True)
class WebhookSettings:
    rules: UrlRules
    policy: RetryPolicy
    timeout_s: float = DEFAULT_TIMEOUT_S
    slots_per_endpoint: int = DEFAULT_SLOTS_PER_ENDPOINT
    endpoint_cache_s: float = DEFAULT_ENDPOINT_CACHE_S

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> WebhookSettings:
        try:
            rules = UrlRules.of((environ.get("ONWARD_WEBHOOK_ALLOWED_NETWORKS") or "").split(","))
            policy = RetryPolicy(
                first_delay_s=number_setting(environ, "ONWARD_WEBHOOK_FIRST_RETRY_S", 10.0, positive=True),
                max_delay_s=number_setting(environ, "ONWARD_WEBHOOK_MAX_RETRY_S", 3600.0, positive=True),
                give_up_after_s=number_setting(environ, "ONWARD_WEBHOOK_GIVE_UP_S", 86_400.0, positive=True))
        except ValueError as error:
            raise InvalidSetting(str(error)) from error
        slots = number_setting(environ, "ONWARD_WEBHOOK_SLOTS_PER_ENDPOINT", DEFAULT_SLOTS_PER_ENDPOINT,
                               positive=True)
        if slots != int(slots):
            raise InvalidSetting(f"ONWARD_WEBHOOK_SLOTS_PER_ENDPOINT must be a whole number, not {slots}")
        return cls(rules=rules, policy=policy,
                   timeout_s=number_setting(environ, "ONWARD_WEBHOOK_TIMEOUT_S", DEFAULT_TIMEOUT_S, positive=True),
                   slots_per_endpoint=int(slots),
                   endpoint_cache_s=number_setting(environ, "ONWARD_WEBHOOK_ENDPOINT_CACHE_S",
                                                   DEFAULT_ENDPOINT_CACHE_S))
