"""A job's tags without AWS (onward/domain/tags.py): what a key, a value and a filter may be, the limit of 10, and
that a job's tags travel from its request to its row, its every event and its view row, never into the digest.

How each would break without the code: a `#` or `=` in a key or value would make two tags share an index
partition (`<tenant>#<key>=<value>#<n>`); a `:` in a key would make `?tag=a:b:c` ambiguous; tags on the digest
would make every event projected before tags existed read as a conflict when redelivered."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from onward.domain.clock import iso
from onward.domain.lifecycle import create
from onward.domain.models import NewJob, OutboxEvent
from onward.domain.projection import digest, view_fields
from onward.domain.tags import MAX_TAGS, TAG_FILTER, TAG_KEY, TAG_VALUE, parse_filter

NOW = 1_764_000_000_000
JOB_ID = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("key", ["env", "a", "team.name", "x-y_z9", "k" * 32])
def test_good_keys(key: str) -> None:
    assert TAG_KEY.matches(key)


@pytest.mark.parametrize("key", ["", "Env", "9env", "_env", "en#v", "en=v", "e:nv", "e,nv", "e nv", "k" * 33,
                                 "env\n"])
def test_bad_keys(key: str) -> None:
    assert not TAG_KEY.matches(key)
    with pytest.raises(ValidationError) as refused:
        NewJob(type="demo.echo", tags={key: "v"})
    assert refused.value.errors()[0]["loc"][0] == "tags"


@pytest.mark.parametrize("value", ["prod", "eu-west-1", "v1.2.3", "a:b", "user@example.org", "s3/path+x", "v" * 64])
def test_good_values(value: str) -> None:
    assert TAG_VALUE.matches(value) and TAG_FILTER.matches(f"env:{value}")
    assert parse_filter(f"env:{value}") == ("env", value)  # split at the first `:`: a value may hold one


@pytest.mark.parametrize("value", ["", "a b", "a#b", "a=b", "a,b", "é", "v" * 65, "prod\n"])
def test_bad_values(value: str) -> None:
    assert not TAG_VALUE.matches(value)
    with pytest.raises(ValidationError):
        NewJob(type="demo.echo", tags={"env": value})


def test_at_most_ten_tags_and_values_are_strings() -> None:
    NewJob(type="demo.echo", tags={f"k{n}": "v" for n in range(MAX_TAGS)})
    for tags in ({f"k{n}": "v" for n in range(MAX_TAGS + 1)}, {"env": 1}, {"env": None}, ["env"]):
        with pytest.raises(ValidationError) as refused:
            NewJob.model_validate({"type": "demo.echo", "tags": tags})
        assert refused.value.errors()[0]["loc"][0] == "tags"


@pytest.mark.parametrize("text", ["env", "env:", ":prod", "Env:prod", "env:a b", "env:prod,team:red"])
def test_a_filter_is_one_key_colon_value(text: str) -> None:
    with pytest.raises(ValueError, match="key:value"):
        parse_filter(text)


def test_tags_travel_from_the_request_to_the_row_every_event_and_the_view_but_not_the_digest() -> None:
    tagged = create(JOB_ID, "acme", NewJob(type="demo.echo", tags={"env": "prod"}), NOW).after
    assert tagged.tags == {"env": "prod"}
    claimed = tagged.model_copy(update={"version": 2, "attempt": 1, "updated_at": NOW + 5})
    event = OutboxEvent.of(claimed)
    assert event.tags == {"env": "prod"} and view_fields(event)["tags"] == {"env": "prod"}
    assert digest(event) == digest(event.model_copy(update={"tags": None}))
    untagged = OutboxEvent.of(create(JOB_ID, "acme", NewJob(type="demo.echo"), NOW).after)
    assert untagged.tags is None and "tags" not in untagged.model_dump(exclude_none=True)
    assert iso(NOW) == untagged.occurred_at
