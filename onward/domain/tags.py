"""A job's tags: up to MAX_TAGS `key: value` pairs its tenant gives at create, to list and count its jobs by
(GET /jobs?tag=key:value). The rules, one place: what a key and a value may be, and how a filter names one.

Why these characters: a tag is part of an index partition key (`<tenant>#<key>=<value>#<shard>`,
onward.pipeline.tag_index), so neither holds `#` or `=`; a filter is `key:value` split at the first `:`, so a
key holds no `:` (a value may); a repeated `?tag=` reaches the API joined by commas, so neither holds `,`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from onward.domain.text_patterns import TAG_FILTER, TAG_KEY, TAG_VALUE

__all__ = ["MAX_TAGS", "TAGS_RULES", "TAG_FILTER", "TAG_KEY", "TAG_VALUE", "TagKey", "TagValue", "Tags",
           "parse_filter"]

MAX_TAGS = 10
# TAG_KEY: 1 to 32 of lower case, digits, `_`, `.`, `-`, a letter first; TAG_VALUE: 1 to 64 of letters, digits and
# `_ . : / @ + -`; TAG_FILTER: `key:value`, as ?tag= names one (onward.domain.text_patterns)

TagKey = Annotated[str, TAG_KEY.constraints()]
TagValue = Annotated[str, TAG_VALUE.constraints()]
Tags = Annotated[dict[TagKey, TagValue], Field(max_length=MAX_TAGS)]
TAGS_RULES = (f"at most {MAX_TAGS} tags, {{\"key\": \"value\"}}: a key is 1 to 32 of a-z 0-9 _ . - starting with a "
              "letter; a value 1 to 64 of A-Z a-z 0-9 _ . : / @ + -. Shown on the job's status; list and count a "
              "tenant's jobs by one with ?tag=key:value")


def parse_filter(text: str) -> tuple[str, str]:
    """A `key:value` filter (TAG_FILTER) as (key, value); ValueError when it is not one."""
    if not TAG_FILTER.matches(text):
        raise ValueError(f"a tag filter is key:value, given {text[:130]!r}")
    key, value = text.split(":", 1)
    return key, value
