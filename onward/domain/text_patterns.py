"""The text patterns of what callers name (tenant ids, job ids and types, schedule names, keys, tokens), each
written once here and matched WHOLE wherever it is checked: the handlers' checks (`TextPattern.matches`), the
models' fields (`TextPattern.text()`, a pydantic type) and the OpenAPI document (`TextPattern.schema()`).

Why one helper: Python's `re.match(r"^acme$", "acme\\n")` matches (`$` also matches before a final newline),
so "acme\\n" passed a handler's check and was refused later by a model (a 500), or named another resource.
`matches` is a fullmatch. `anchored` (`^...$`) is the text for JSON Schema (ECMA-262) and for pydantic (Rust's
regex crate), where `$` without the multi-line flag matches at the very end only, the same rule; `\\Z`, its
Python spelling, means something else in both. tests/unit/domain/test_input_rules.py holds the three to agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import StringConstraints


@dataclass(frozen=True)
class TextPattern:
    """A regular expression `body` (no anchors, no top-level `|`) that a whole text must match."""

    body: str
    max_length: int | None = None  # beside the pattern, for one whose repetition is unbounded
    _compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_compiled", re.compile(self.body))

    @property
    def anchored(self) -> str:
        return f"^{self.body}$"

    def matches(self, text: object) -> bool:
        """Whether `text` is a str matching the pattern whole (a trailing newline included in the match)."""
        return (isinstance(text, str) and (self.max_length is None or len(text) <= self.max_length)
                and self._compiled.fullmatch(text) is not None)

    def constraints(self) -> StringConstraints:
        """A str field's constraints in pydantic: `Annotated[str, PATTERN.constraints()]`."""
        return StringConstraints(pattern=self.anchored, max_length=self.max_length)

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of a string of this pattern (an OpenAPI parameter's)."""
        return {"type": "string", "pattern": self.anchored,
                **({} if self.max_length is None else {"maxLength": self.max_length})}


TENANT_ID = TextPattern(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
SCHEDULE_NAME = TextPattern(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
JOB_ID = TextPattern(r"[0-9a-f]{32}")
JOB_ID_PREFIX = TextPattern(r"[0-9a-f]{1,32}")
JOB_TYPE = TextPattern(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*", max_length=128)
IDEMPOTENCY_KEY = TextPattern(r"[ -~]{1,128}")  # printable ASCII
SECRET = TextPattern(r"[!-+\--~]{1,512}")  # a bearer token: visible ASCII except the comma (ONWARD_TOKENS' separator)
WEB_ASSET = TextPattern(r"[a-z0-9-]+\.(js|css|svg)")  # a file of the status page (web/)
# tags (issue 38): a job's tag key and value, and a `key:value` filter (onward.domain.tags says why these)
TAG_KEY = TextPattern(r"[a-z][a-z0-9_.-]{0,31}")
TAG_VALUE = TextPattern(r"[A-Za-z0-9_.:/@+-]{1,64}")
TAG_FILTER = TextPattern(r"[a-z][a-z0-9_.-]{0,31}:[A-Za-z0-9_.:/@+-]{1,64}")
# trace context (issue 38): a W3C traceparent as a job stores it (version 00; onward.observability.trace_context)
TRACE_PARENT = TextPattern(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
# completion webhooks (issue 38)
WEBHOOK_ID = TextPattern(r"wh_[0-9a-f]{24}")
DELIVERY_ID = TextPattern(r"[0-9a-f]{32}")
# unique jobs (issue 37): a tenant's unique key, printable ASCII as an Idempotency-Key; its item's key
# UNIQUE#<tenant>#<key> stays far under DynamoDB's 2,048 bytes
UNIQUE_KEY = TextPattern(r"[ -~]{1,200}")
# rate limits (issue 37): a limit's key and a job's rate_limit_key; no `/` (a path segment of /rate-limits/{key})
RATE_LIMIT_KEY = TextPattern(r"[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}")
# concurrency keys (issue 37): a tenant's concurrency key, printable ASCII as a unique key
CONCURRENCY_KEY = TextPattern(r"[ -~]{1,200}")
