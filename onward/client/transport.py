"""How the client sends a request and when it tries again, shared by Client and AsyncClient (which only do the
I/O): a request as a value (`Call`), the retry rule (`RetryPolicy`) and turning an answer into its JSON or a
typed exception (onward.client.errors).

What is retried, and why it is safe:
- a connection that was never made (connect error or timeout, no free connection): always, nothing was sent;
- 429 and 503: always, after Retry-After when the API gives one: the API answers them before acting (the
  tenant's request quota; a transaction that did not commit);
- any other transport error (the answer was lost) and 500, 502, 504: only for an idempotent call: a read, a
  submit (it carries an Idempotency-Key, the same one on every try, so the API answers the job the first try
  created instead of creating another), a batch (each entry carries its own key). A cancel, a replay and the
  schedule calls are not retried then: a second try could answer as if the first had not happened.
Each retry waits an exponential backoff with full jitter (a uniform draw between 0 and min(cap, base * 2^n)),
or Retry-After when it is longer; the tries are bounded in number and in total time.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from onward.client.errors import api_error

USER_AGENT = "onward-client/1"
# Each network step of a request (connect, write, read): above API Gateway's 29 s integration limit, so that a
# slow answer (a job read from the run-history archive takes up to 20 s) ends as the API's, not as a timeout
# retried into the same slow read again.
DEFAULT_TIMEOUT_S = 30.0
RETRIED_ALWAYS = frozenset({429, 503})
RETRIED_IF_IDEMPOTENT = frozenset({500, 502, 504})
# Transport errors raised before the request left: no server can have acted on it.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def new_idempotency_key() -> str:
    """A key for one submit, reused by each of its retries (the API takes 1 to 128 printable ASCII characters)."""
    return f"onward-client-{uuid.uuid4().hex}"


@dataclass(frozen=True)
class RetryPolicy:
    """At most `attempts` tries of one call within `budget_s` seconds (a wait that would end past it is not
    made), each retry after a full-jitter backoff from `base_s` doubling up to `cap_s`, or Retry-After."""

    attempts: int = 4
    base_s: float = 0.2
    cap_s: float = 5.0
    budget_s: float = 30.0
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.base_s <= 0 or self.cap_s < self.base_s or self.budget_s < 0:
            raise ValueError("a RetryPolicy needs attempts >= 1, 0 < base_s <= cap_s and budget_s >= 0")

    def backoff_s(self, retry: int) -> float:
        """The wait before retry number `retry` (1 for the first): uniform in [0, min(cap, base * 2^(retry-1))]."""
        return self.rng.uniform(0.0, min(self.cap_s, self.base_s * 2 ** (retry - 1)))

    def delay_s(self, attempt: int, elapsed_s: float, retry_after_s: float | None = None) -> float | None:
        """The wait before trying again after try number `attempt`, or None: no more tries (attempts spent, or
        the wait would end past the budget)."""
        if attempt >= self.attempts:
            return None
        delay = self.backoff_s(attempt)
        if retry_after_s is not None:
            delay = max(delay, retry_after_s)
        return None if elapsed_s + delay > self.budget_s else delay


NO_RETRIES = RetryPolicy(attempts=1)


@dataclass(frozen=True)
class Call:
    """One request: its method, path (below the base URL), query, JSON body and headers, and whether trying it
    again after a lost answer is safe (see the module's docstring)."""

    method: str
    path: str
    params: dict[str, str] | None = None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    idempotent: bool = False

    def request(self, http: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        content = None if self.body is None else json.dumps(self.body).encode()
        headers = dict(self.headers)
        if content is not None:
            headers["Content-Type"] = "application/json"
        return http.build_request(self.method, self.path, params=self.params, content=content, headers=headers)


def session_headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Accept": "application/json", "User-Agent": USER_AGENT}


def retry_after_s(response: httpx.Response, now: datetime | None = None) -> float | None:
    """Retry-After in seconds: a number of seconds, or an HTTP date (RFC 9110 section 10.2.3); None when absent
    or unreadable."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def retry_delay_after_answer(policy: RetryPolicy, call: Call, response: httpx.Response, attempt: int,
                             elapsed_s: float) -> float | None:
    """The wait before another try after this answer, or None: the answer is final (a success, a refusal, or
    the retries are spent)."""
    status = response.status_code
    if status in RETRIED_ALWAYS or (call.idempotent and status in RETRIED_IF_IDEMPOTENT):
        return policy.delay_s(attempt, elapsed_s, retry_after_s(response))
    return None


def retry_delay_after_error(policy: RetryPolicy, call: Call, error: httpx.TransportError, attempt: int,
                            elapsed_s: float) -> float | None:
    """The wait before another try after a transport error, or None: raise it."""
    if isinstance(error, NOT_SENT) or call.idempotent:
        return policy.delay_s(attempt, elapsed_s)
    return None


def checked(response: httpx.Response) -> httpx.Response:
    """The response if it is a success (2xx or 304); else the typed exception for its problem document."""
    if response.status_code < 400:
        return response
    try:
        body = response.json()
    except ValueError:
        body = None
    headers = {name.lower(): value for name, value in response.headers.items()}
    raise api_error(response.status_code, body, headers, retry_after_s(response))
