"""The input rules without AWS: identifiers matched whole (onward/domain/text_patterns.py) by the API, the models and
the OpenAPI document alike; numbers in a caller's JSON kept exactly or refused (onward/domain/documents.py); request
models strict about JSON types; cron and rate in ASCII and zones by IANA name (onward/domain/schedules.py).

Each test says how it would break without the rule: a trailing newline read away by `re.match("^...$")`, a
whole float coming back from DynamoDB as an int, `"false"` read as false, `int("٣")` read as 3."""

from __future__ import annotations

import json
from typing import Annotated, Any

import jsonschema_rs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openapi_spec_validator import validate
from pydantic import TypeAdapter, ValidationError

from onward.api.app import openapi_document
from onward.api.auth import InvalidTokens, JwtClaimsAuthenticator, NoTenant, parse_tokens
from onward.api.contract.jobs import BatchCreate, BatchJob
from onward.api.contract.operators import BulkCancelRequest, BulkReplay, BulkReplayRequest
from onward.domain import text_patterns
from onward.domain.documents import exact_problems, parse_json_float
from onward.domain.models import JobType, NewJob, TenantId
from onward.domain.schedules import NewSchedule, check_timezone, parse_cron, parse_rate
from onward.store.dynamo.attributes import from_item, to_attribute

PATTERNS = {name: value for name, value in vars(text_patterns).items() if isinstance(value, text_patterns.TextPattern)}
SAMPLES = {"TENANT_ID": "acme", "SCHEDULE_NAME": "nightly.v2", "JOB_ID": "0123456789abcdef0123456789abcdef",
           "JOB_ID_PREFIX": "0a1b", "JOB_TYPE": "reports.export_v2", "IDEMPOTENCY_KEY": "order 42",
           "SECRET": "s3cr3t!", "WEB_ASSET": "app.js",
           # tags (issue 38)
           "TAG_KEY": "env", "TAG_VALUE": "eu-west-1", "TAG_FILTER": "env:prod",
           "TRACE_PARENT": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
           "WEBHOOK_ID": "wh_0123456789abcdef01234567", "DELIVERY_ID": "0123456789abcdef0123456789abcdef",
           # unique jobs (issue 37)
           "UNIQUE_KEY": "report:42 (daily)", "CONCURRENCY_KEY": "customer 42",
           "RATE_LIMIT_KEY": "type:email.send"}  # rate limits (issue 37)


# --- identifiers, matched whole ------------------------------------------------------------------------------

def test_every_pattern_has_a_sample() -> None:
    assert set(PATTERNS) == set(SAMPLES)


@pytest.mark.parametrize("name", sorted(SAMPLES))
@pytest.mark.parametrize("suffix", ["\n", "\r\n", "\n\n", "\x00"])
def test_a_pattern_refuses_a_trailing_newline_in_python_pydantic_and_the_document(name: str, suffix: str) -> None:
    """Python's `$` matches before a final newline: `re.match("^[a-z]+$", "acme\\n")` matches. Each pattern
    must refuse it in its three uses: TextPattern.matches (the handlers), its pydantic type (Rust's regex: the
    models) and its schema in the OpenAPI document, read by a JSON Schema validator with ECMA-262's regex
    (jsonschema_rs, as schemathesis does; `\\Z` there would mean a literal "Z")."""
    pattern, good = PATTERNS[name], SAMPLES[name]
    assert pattern.matches(good) and not pattern.matches(good + suffix)
    adapter: TypeAdapter[str] = TypeAdapter(Annotated[str, pattern.constraints()])
    assert adapter.validate_python(good) == good
    with pytest.raises(ValidationError):
        adapter.validate_python(good + suffix)
    schema = jsonschema_rs.validator_for(pattern.schema())
    assert schema.is_valid(good) and not schema.is_valid(good + suffix)


def test_the_document_uses_only_the_helpers_patterns() -> None:
    """Every `pattern` in the OpenAPI document is one of the helper's anchored patterns: a pattern written out
    by hand could anchor differently from the server's check (or drift from it)."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                found.append(node["pattern"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(openapi_document())
    assert found and set(found) <= {pattern.anchored for pattern in PATTERNS.values()}


def test_the_served_document_is_valid_openapi() -> None:
    validate(openapi_document(frozenset({"demo.echo", "reports.export"})))


def test_a_jwt_claim_that_is_not_a_tenant_id_is_no_tenant() -> None:
    """A claim "acme\\n" passed `TENANT_PATTERN.match` and became the caller's tenant: GET /whoami answered 500."""
    jwt = JwtClaimsAuthenticator()
    for claim in ("acme\n", "acme\r\n", " acme", "", "a" * 65):
        with pytest.raises(NoTenant):
            jwt.authenticate({"requestContext": {"authorizer": {"jwt": {"claims": {"sub": "u", "tenant": claim}}}}})


def test_local_tokens_refuse_a_trailing_newline() -> None:
    with pytest.raises(InvalidTokens):
        parse_tokens([], operator_token="operator\n")
    with pytest.raises(InvalidTokens):
        parse_tokens(["acme=secret\n"])


def test_the_models_identifier_types_refuse_a_trailing_newline() -> None:
    for annotation, good in ((TenantId, "acme"), (JobType, "demo.echo")):
        with pytest.raises(ValidationError):
            TypeAdapter(annotation).validate_python(good + "\n")


# --- numbers, exactly or not at all --------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "reason"), [("2.0", "no fraction"), ("1e20", "no fraction"),
                                         ("-0.0", "no fraction"), ("0.0", "no fraction"), ("6.02e23", "no fraction"),
                                         ("1e-400", "range"), ("-1e-400", "range"),
                                         ("1e400", "range")])
def test_a_float_that_would_not_come_back_as_sent_is_refused_with_its_place(text: str, reason: str) -> None:
    """DynamoDB keeps one number type: a whole float comes back an int (2.0 as 2); a literal outside a float's
    range parses to 0.0 or infinity (1e-400 as 0). Both were stored silently."""
    document = json.loads(f'{{"a": [1, {{"b": {text}}}]}}', parse_float=parse_json_float)
    ((where, why),) = list(exact_problems(document))
    assert where == ("a", 1, "b") and reason in why


NON_WHOLE_FLOATS = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda x: not x.is_integer() and 1e-130 <= abs(x) < 1e126)
EXACT = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**38) + 1, 10**38 - 1) | NON_WHOLE_FLOATS | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(min_size=1), inner, max_size=4),
    max_leaves=20)


@given(EXACT)
def test_what_passes_comes_back_from_dynamodb_as_the_same_json(value: Any) -> None:
    """Property: a document with no problem is read back (to_attribute, from_item) as the same JSON text,
    type for type. Fails if any accepted number comes back as another value or type."""
    text = json.dumps(value)
    parsed = json.loads(text, parse_float=parse_json_float)
    if list(exact_problems(parsed)):
        return  # a lone surrogate from st.text(), say: refused, never stored
    assert json.dumps(from_item({"v": to_attribute(parsed)})["v"]) == text


def test_new_jobs_and_schedules_refuse_a_whole_float_in_params() -> None:
    for model, fields in ((NewJob, {"type": "demo.echo"}),
                          (NewSchedule, {"name": "n", "type": "demo.echo", "rate": "1 hour"})):
        with pytest.raises(ValidationError, match=r"params\.n"):
            model.model_validate({**fields, "params": {"n": 2.0}})
        assert model.model_validate({**fields, "params": {"n": 2, "x": 2.5}}).params == {"n": 2, "x": 2.5}


# --- strict JSON types ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("model", "body"), [
    (BulkCancelRequest, {"tenant": "acme", "dry_run": "false"}),
    (BulkCancelRequest, {"tenant": "acme", "dry_run": 0}),
    (BulkReplayRequest, {"dry_run": "no"}),
    (BulkReplayRequest, {"max_jobs": "10"}),
    (BulkReplayRequest, {"max_jobs": 10.0}),
    (BulkReplayRequest, {"since": 1_700_000_000}),
    (BulkReplayRequest, {"until": "1700000000"}),
    (BulkReplayRequest, {"states": ["dead"], "tenant": 7}),
    (BulkReplay, {"job_ids": [12]}),
    (NewJob, {"type": "demo.echo", "max_attempts": "3"}),
    (NewJob, {"type": "demo.echo", "priority": True}),
    (NewJob, {"type": "demo.echo", "delay_s": "5"}),
    (BatchJob, {"type": "demo.echo", "idempotency_key": 5}),
    (BatchCreate, {"jobs": ({"type": "demo.echo"},)}),
    (NewSchedule, {"name": "n", "type": "demo.echo", "rate": "1 hour", "priority": "1"}),
])
def test_request_models_take_json_types_only(model: Any, body: dict[str, Any]) -> None:
    """pydantic's lax mode reads "false", 0 and "no" as False, "10" and 10.0 as 10, a number as a time: a
    request that changes or deletes data would act on what the caller did not write."""
    with pytest.raises(ValidationError):
        model.model_validate(body)


def test_request_models_still_take_what_json_carries() -> None:
    bulk = BulkReplayRequest.model_validate({"states": ["dead"], "since": "2026-01-01T00:00:00Z", "dry_run": False,
                                             "max_jobs": 5, "types": ["demo.fail"]})
    assert (bulk.dry_run, bulk.max_jobs, bulk.states[0].value, bulk.since is not None) == (False, 5, "dead", True)
    job = NewJob.model_validate({"type": "demo.echo", "delay_s": 5, "timeout_s": 1.5, "run_at": None})
    assert (job.delay_s, job.timeout_s) == (5, 1.5)


# --- cron, rate, zones ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("cron", ["\u0663 * * * *", "0 \uff11 * * *", "\u00b9 * * * *", "0 0 * * \u017fun",
                                  "0\u20030 * * *", "0 0 * \u0131an *", "0 0 * * *\n", "0\x1c0 * * *"])
def test_cron_is_ascii(cron: str) -> None:
    with pytest.raises(ValueError, match="not a cron expression"):
        parse_cron(cron)


@pytest.mark.parametrize("rate", ["\uff11 minute", "\u0665 minutes", "5 minute\u017f", "5\u00a0minutes",
                                  "5 minutes\n", "5\x1cminutes", "\u00b2 hours"])
def test_rate_is_ascii(rate: str) -> None:
    with pytest.raises(ValueError, match="not a rate"):
        parse_rate(rate)


def test_documented_cron_and_rates_still_parse() -> None:
    assert parse_rate("5 minutes") == 300_000 and parse_rate(" 1 HOUR ") == 3_600_000
    assert parse_cron("0 9 * * MON-FRI").hours == (9,) and parse_cron("*/30\t0 1 jan sun").minutes == (0, 30)


@pytest.mark.parametrize("zone", ["localtime", "Factory", "posixrules", "right/UTC", "posix/UTC", "posix/Europe/Paris",
                                  "UTC\n", "utc", "", "/etc/localtime", "../zoneinfo/UTC", "Europe"])
def test_only_iana_zone_names_are_time_zones(zone: str) -> None:
    """ZoneInfo loads any file of the host's zone database: `localtime` is whatever zone the host has, `Factory`
    a placeholder, `right/` zones count leap seconds. Accepted before, each made a schedule fire on another
    clock than the tenant meant, or one that differs from host to host."""
    with pytest.raises(ValueError, match="IANA"):
        check_timezone(zone)


def test_iana_zone_names_are_time_zones() -> None:
    for zone in ("UTC", "Europe/Paris", "America/Argentina/Buenos_Aires", "Etc/GMT+5", "US/Eastern", "Asia/Kolkata"):
        assert str(check_timezone(zone)) == zone
