"""Schema-driven fuzzing of the HTTP API (schemathesis, from the /openapi.json the API serves) over real HTTP:
local gateway (infra/onward_infra/gateway.py) -> onward.api.app.handler -> embedded stack.

For every operation, valid and invalid requests (schemathesis' positive and negative generation), with a
tenant's token, the operator's, a wrong one or none, and with a job id that does not exist or is another
tenant's. Every answer must be:
- never a 5xx (an unhandled input is a bug: without the handler's edge validation and error mapping, bad
  bodies, parameters and ids would surface as 500s);
- when refused (4xx), application/problem+json with type, title, status (= the HTTP status) and detail;
- when refused, without a write: the jobs and outbox tables hold exactly what they held before (without the
  validation-before-write order, a refused create could leave a tenant item, a job or an event behind).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import strategies as st
from schemathesis import GenerationMode

from onward.domain.models import NewJob
from onward.store.service import JobStore
from tests.integration.api_support import serve_api

pytestmark = pytest.mark.integration

TOKENS = {"acme": "acme-fuzz-secret", "globex": "globex-fuzz-secret"}
OPERATOR = "operator-fuzz-secret"
CREDENTIALS = [f"Bearer {TOKENS['acme']}", f"Bearer {OPERATOR}", "Bearer not-a-token", None, "Basic abc"]
EXAMPLES = 25


@pytest.fixture
def gateway(stack_environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with serve_api(monkeypatch, TOKENS, OPERATOR) as url:
        yield url


def _count(dynamodb, table: str) -> int:
    return sum(page["Count"] for page in dynamodb.get_paginator("scan").paginate(TableName=table, Select="COUNT"))


def _check(case: Any, response: Any, written: tuple[int, ...], before: tuple[int, ...]) -> None:
    where = f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:300]}"
    assert response.status_code < 500, where
    if response.status_code >= 400:
        content_type = response.headers.get("content-type")
        content_type = content_type[0] if isinstance(content_type, list) else content_type
        assert content_type == "application/problem+json", where
        problem = json.loads(response.text)
        assert {"type", "title", "status", "detail"} <= set(problem), where
        assert problem["status"] == response.status_code, where
        assert written == before, f"a refused request wrote: {where}"


def _fuzzer(strategy: Any, gateway: str, dynamodb: Any, tables: tuple[str, str], statuses: set[int]) -> Any:
    """A hypothesis test calling the API with each generated case and each credential, checking each answer."""

    @hypothesis.settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                         suppress_health_check=list(HealthCheck))
    @given(case=strategy, credential=st.sampled_from(CREDENTIALS))
    def fuzz(case: Any, credential: str | None) -> None:
        headers = {} if credential is None else {"Authorization": credential}
        before = tuple(_count(dynamodb, table) for table in tables)
        response = case.call(base_url=gateway, headers=headers, timeout=30)
        written = tuple(_count(dynamodb, table) for table in tables)
        statuses.add(response.status_code)
        _check(case, response, written, before)

    return fuzz


def test_no_request_the_schema_allows_or_forbids_gets_a_500_or_a_write_when_refused(gateway, settings, dynamodb):
    store = JobStore(settings, client=dynamodb)
    mine = store.create("acme", NewJob(type="demo.echo")).job.job_id  # registers the tenant too
    theirs = store.create("globex", NewJob(type="demo.echo")).job.job_id
    tables = (settings.jobs_table, settings.outbox_table)
    schema = schemathesis.openapi.from_url(f"{gateway}/openapi.json")
    seen: dict[str, set[int]] = {}
    unbreakable: set[str] = set()

    for result in schema.get_all_operations():
        operation = result.ok()
        # generated values, plus: a real job id (another tenant's and acme's), a known job type
        variants: list[dict[str, Any]] = [{}]
        if "{job_id}" in operation.path:
            variants += [{"path_parameters": {"job_id": theirs}}, {"path_parameters": {"job_id": mine}}]
        if (operation.method.upper(), operation.path) == ("POST", "/jobs"):
            variants.append({"body": {"type": "demo.echo", "params": {"n": 1}}})
        for fixed in variants:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                if fixed and mode is GenerationMode.NEGATIVE:
                    continue  # the fixed part is valid on purpose; negative cases come from the first variant
                strategy = operation.as_strategy(generation_mode=mode, **fixed)
                statuses = seen.setdefault(f"{operation.method.upper()} {operation.path}", set())
                fuzz = _fuzzer(strategy, gateway, dynamodb, tables, statuses)
                try:
                    fuzz()  # @given supplies the arguments
                except hypothesis.errors.Unsatisfiable:
                    # an operation without parameters or body (GET /health) has no invalid request to make
                    assert mode is GenerationMode.NEGATIVE, operation.path
                    unbreakable.add(f"{operation.method.upper()} {operation.path}")

    assert all(seen.values()) and len(seen) == len(list(schema.get_all_operations())), "every operation ran"
    refused = {status for statuses in seen.values() for status in statuses if status >= 400}
    assert {400, 401, 404, 422} <= refused, f"the fuzzing reached the refusals: {sorted(refused)}"
    assert any(status < 300 for status in seen["POST /jobs"]), "some creates were valid and accepted"
    assert not unbreakable & {"POST /jobs", "GET /jobs", "GET /jobs/{job_id}"}, "these have inputs to break"


# --- hostile JSON, generated as text (schemathesis only makes what a JSON encoder can) ---------------------------

def _json_text(leaf: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.recursive(leaf, lambda inner: st.lists(inner, max_size=3).map(lambda items: "[" + ",".join(items) + "]")
                        | st.lists(st.tuples(KEY_TEXT, inner), max_size=3).map(
                            lambda pairs: "{" + ",".join(f"{k}:{v}" for k, v in pairs) + "}"), max_leaves=8)


KEY_TEXT = st.sampled_from(['""', '"a"', '"\\ud800"', '"\\udfff x"', '"k\\u0000"', '"\\u00e9"'])
HOSTILE_LEAF = st.one_of(
    st.integers(-(10**60), 10**60).map(str),  # beyond 38 significant digits too
    st.sampled_from(["1e200", "-1e200", "1e-200", "1e126", "1e-131", "1e125", "1e-130", "NaN", "Infinity",
                     "-Infinity", "1e400", "-0.0", "0", "true", "null", "2.0", "1e20", "1e-400", "0.1"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(['"\\ud800"', '"\\udc00\\ud800"', '"ok"', '""', '"\\u0000"', '"\\ud83d\\ude00"']),
    st.integers(30, 4000).map(lambda depth: "[" * depth + "]" * depth),  # past DynamoDB's 32 levels, and deeper
)
HOSTILE_PARAMS = _json_text(HOSTILE_LEAF)


def test_hostile_json_in_params_is_never_a_500_and_a_refusal_writes_nothing(gateway, settings, dynamodb):
    """Numbers DynamoDB cannot hold (over 38 digits, 1e200, 1e-200, NaN, Infinity), lone surrogates in keys
    and values, empty keys and nesting past 32 levels, floats DynamoDB would give back as ints (2.0, 1e20) or
    a float cannot hold (1e-400), mixed with what is fine: each create is accepted and stored exactly (the
    same JSON, type for type) or refused with problem+json and nothing written. Before the edge checks, most
    of these were 500s, NaN was stored as null, an empty key reached the outbox stream, and 2.0 came back 2."""
    from tests.integration.api_support import http_call

    JobStore(settings, client=dynamodb).create("acme", NewJob(type="demo.echo"))  # the tenant exists
    tables = (settings.jobs_table, settings.outbox_table)
    statuses: set[int] = set()

    @hypothesis.settings(max_examples=120, deadline=None, database=None, derandomize=True,
                         suppress_health_check=list(HealthCheck))
    @given(params=HOSTILE_PARAMS)
    def fuzz(params: str) -> None:
        before = tuple(_count(dynamodb, table) for table in tables)
        raw = ('{"type": "demo.echo", "params": {"p": ' + params + "}}").encode()
        answer = http_call(gateway, "POST", "/jobs", token=TOKENS["acme"], raw=raw)
        statuses.add(answer.status)
        assert answer.status < 500, (params[:200], answer.body)
        if answer.status >= 400:
            assert answer.headers["content-type"] == "application/problem+json"
            assert answer.body["status"] == answer.status
            assert tuple(_count(dynamodb, table) for table in tables) == before, params[:200]
        else:
            stored = JobStore(settings, client=dynamodb).get(answer.body["job_id"]).params["p"]
            assert json.dumps(stored) == json.dumps(json.loads(params)), params[:200]

    fuzz()
    assert {202, 400, 422} <= statuses, statuses


def test_hostile_cursors_are_never_a_500(gateway):
    """Any text, and base64 of hostile JSON (deep nesting included: before, a RecursionError and a 500), as
    the list's cursor: answered 200 (a valid cursor) or 400, never a 5xx."""
    import base64
    from urllib.parse import quote

    from tests.integration.api_support import http_call

    @hypothesis.settings(max_examples=60, deadline=None, database=None, derandomize=True,
                         suppress_health_check=list(HealthCheck))
    @given(cursor=st.one_of(st.text(max_size=3000), HOSTILE_PARAMS.map(
        lambda text: base64.urlsafe_b64encode(text.encode("utf-8", "surrogatepass")).decode())))
    def fuzz(cursor: str) -> None:
        answer = http_call(gateway, "GET", f"/jobs?cursor={quote(cursor.encode('utf-8', 'surrogatepass'))}",
                           token=TOKENS["acme"])
        assert answer.status in (200, 400), (cursor[:100], answer.body)

    fuzz()
