"""How long an attempt may run: the job's timeout_s as asked (validated, stored as asked, old rows without it
still read), the job type's default in the registry, the platform's default and its cap (pure)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from onward.domain import lifecycle
from onward.domain.models import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S, Job, NewJob
from onward.runtime.worker import InvalidRegistration, Registry
from onward.store.dynamo.keys import job_from_values, job_item

JOB_ID = "0" * 32


def job(timeout_s: float | None = None, job_type: str = "t.work") -> Job:
    return lifecycle.create(JOB_ID, "acme", NewJob(type=job_type, timeout_s=timeout_s), now=1_000).after


@pytest.mark.parametrize("timeout_s", [0.001, 1, 2.5, MAX_TIMEOUT_S])
def test_a_timeout_within_the_range_is_kept_on_the_job_as_asked(timeout_s):
    """Catches lifecycle.create dropping the field (every job would get its type's default)."""
    assert job(timeout_s).timeout_s == timeout_s


@pytest.mark.parametrize("timeout_s", [0, -1, MAX_TIMEOUT_S + 1, math.inf, math.nan, "30", True],
                         ids=["zero", "negative", "above the maximum", "infinity", "nan", "text", "bool"])
def test_a_timeout_out_of_range_or_not_a_number_is_refused_saying_why(timeout_s):
    """Catches a job that could hold a worker for longer than the platform allows (or forever), and a
    client's "30" taken for a number."""
    with pytest.raises(ValidationError) as refused:
        NewJob(type="t.work", timeout_s=timeout_s)
    (error,) = refused.value.errors()
    assert error["loc"] == ("timeout_s",)
    if timeout_s == MAX_TIMEOUT_S + 1:
        assert str(MAX_TIMEOUT_S) in error["msg"]


def test_the_documented_schema_states_the_range_and_the_default():
    """Catches an API document (generated from NewJob) that does not say what a client may send."""
    schema = NewJob.model_json_schema()["properties"]["timeout_s"]
    number = next(option for option in schema["anyOf"] if option.get("type") == "number")
    assert (number["exclusiveMinimum"], number["maximum"]) == (0, MAX_TIMEOUT_S)
    assert "Timeout" in schema["description"] and "15 minutes" in schema["description"]


def test_the_row_stores_what_was_asked_and_an_old_row_without_it_still_reads():
    """Catches a row that loses the timeout on its way through DynamoDB's item shape, and rows written before
    the field existed failing to load (every running job would be stuck)."""
    stored = job_item(job(2.5), ready_shards=1, retention_s=3600)
    assert stored["timeout_s"] == 2.5
    assert job_from_values(stored)[0].timeout_s == 2.5
    without = job_item(job(None), ready_shards=1, retention_s=3600)
    assert "timeout_s" not in without  # None is not stored: the row looks as before the field existed
    assert job_from_values(without)[0].timeout_s is None


def test_a_stored_timeout_above_todays_maximum_still_reads_and_is_capped_when_run():
    """Catches a lowered MAX_TIMEOUT_S making older rows unreadable, or letting them run past it."""
    above = job(10.0).model_copy(update={"timeout_s": MAX_TIMEOUT_S * 2})
    row = job_item(above, ready_shards=1, retention_s=3600)
    assert job_from_values(row)[0].timeout_s == MAX_TIMEOUT_S * 2
    assert Registry().attempt_timeout_s(above) == MAX_TIMEOUT_S


def test_an_attempt_gets_the_jobs_timeout_else_its_types_else_the_platforms():
    """Catches the type's default overriding what the job asked for, and a type without one running
    unbounded."""
    registry = Registry()
    registry.register("t.quick", timeout_s=5)(lambda context: None)
    registry.register("t.work")(lambda context: None)
    assert registry.attempt_timeout_s(job(job_type="t.quick")) == 5
    assert registry.attempt_timeout_s(job(60, job_type="t.quick")) == 60
    assert registry.attempt_timeout_s(job(job_type="t.work")) == DEFAULT_TIMEOUT_S == 15 * 60
    assert registry.attempt_timeout_s(job(job_type="t.unregistered")) == DEFAULT_TIMEOUT_S


@pytest.mark.parametrize("timeout_s", [0, -5, MAX_TIMEOUT_S + 1, math.nan, "60", True])
def test_a_type_default_out_of_range_is_refused_at_registration(timeout_s):
    """Catches a worker that starts with a type whose default the platform would never allow (validated when
    the handlers' module is imported, not at the first job)."""
    with pytest.raises(InvalidRegistration, match=r"t\.bad") as refused:
        Registry().register("t.bad", timeout_s=timeout_s)
    assert str(MAX_TIMEOUT_S) in str(refused.value)


def test_registering_again_replaces_the_types_default_and_changes_the_version():
    """Catches a stale default after a type is registered anew, and a handler process that would keep running
    the old handler (it is forked again when the version changes)."""
    registry = Registry()
    registry.register("t.work", timeout_s=5)(lambda context: None)
    version = registry.version
    registry.register("t.work")(lambda context: None)
    assert registry.timeout_s("t.work") == DEFAULT_TIMEOUT_S
    assert registry.version != version
