"""The call-path reading (tests/codescan.py) never under-approximates: every project function a Lambda handler or
an operator command really runs, traced with sys.setprofile while it serves real requests against a stack on
the embedded endpoint, is one the static reading of that entry point reached. The IAM policies are compared
with that reading (tests/unit/project/test_template_policies.py), so a function the reading missed could make SDK calls
its role does not grant: AccessDenied on AWS only.

How it breaks: make the reading stop following the methods a library calls on a subclass of its class (drop the
`foreign` rule in tests/codescan.py) and the projector's check fails, listing
InOrderBatchProcessor.process, which Powertools' batch processing calls by itself; any
rule dropped that the traced code relies on lists the units it ran and the reading missed.
"""

from __future__ import annotations

import gc
import inspect
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import pytest

from onward import bootstrap
from onward.api import app as api_app
from onward.bootstrap import Deployment
from onward.domain.models import NewJob
from onward.entrypoints import projector as projector_app
from onward.entrypoints import reaper as reaper_app
from onward.entrypoints import relay as relay_app
from onward.entrypoints import scheduler as scheduler_app
from onward.entrypoints import worker as worker_app
from onward_infra.lambda_context import LocalLambdaContext
from tests.codescan import NOT_SHIPPED, ROOT, read_code
from tests.integration.entrypoints.test_lambda_events import (
    http_event,
    kinesis_event,
    outbox_event,
    outbox_stream_arn,
    sample,
)
from tests.unit.project.test_template_policies import handler_roots, operator_roots

pytestmark = pytest.mark.integration


def unit_of(code: CodeType, excluded: tuple[str, ...]) -> str | None:
    """The reading's label of the unit a code object belongs to ("module" or "module:qualname"), None outside
    the project or in the `excluded` packages."""
    try:
        relative = Path(code.co_filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    if relative.parts[0] != "onward" or relative.suffix != ".py":
        return None
    module = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
    if any(module == package or module.startswith(package + ".") for package in excluded):
        return None
    qualname = code.co_qualname.split(".<locals>.")[0]  # a nested function or comprehension: its enclosing one
    parts = qualname.split(".")
    if not code.co_flags & inspect.CO_NEWLOCALS or parts[-1].startswith("<"):
        return module  # the module's code, a class body, or a comprehension in one
    return f"{module}:{'.'.join(parts[-2:])}"


@contextmanager
def traced(excluded: tuple[str, ...]) -> Iterator[set[str]]:
    """The units of project code (but the `excluded` packages) called while the block runs, in any thread."""
    seen: set[str] = set()
    codes: set[CodeType] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code not in codes:
            codes.add(frame.f_code)

    # Earlier tests' deployments are dropped now, not inside the trace: one evicted there (a new environment's
    # deployment pushes out the oldest kept) closes its worker's handler process from the worker's finalizer,
    # which would read as code the entry point ran.
    bootstrap._deployments.clear()
    gc.collect()
    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        yield seen
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        seen |= {unit for code in codes if (unit := unit_of(code, excluded)) is not None}


def assert_read(roots: list[str], run: Callable[[], None], excluded: tuple[str, ...] = NOT_SHIPPED) -> set[str]:
    """`run` traced: what it ran of the project (the embedded endpoint, serving in this process, excluded) must
    be in the reading of `roots`."""
    with traced(excluded) as seen:
        run()
    reached = set(read_code(roots).reached_from)
    assert seen, "nothing was traced: the check would pass on anything"
    assert not seen - reached, f"{roots} ran code the reading did not reach: {sorted(seen - reached)}"
    return seen


@pytest.fixture
def functions_environment(stack_environment: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("ONWARD_AUTH", "jwt")
    monkeypatch.setenv("ONWARD_TENANT_CLAIM", "tenant")
    monkeypatch.setenv("ONWARD_OPERATOR_CLAIM", "groups")
    monkeypatch.setenv("ONWARD_WORKER_MODULE", "onward.runtime.demo_jobs")
    monkeypatch.setenv("ONWARD_WORKER_LEASE_S", "5")
    for name in ("ONWARD_TOKENS", "ONWARD_OPERATOR_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    as_on_aws(monkeypatch)
    return stack_environment


def as_on_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clients as AWS's functions and operators build them: ONWARD_CLIENT_WRAPPER (the lean client) is the embedded
    endpoint's
    (plugged in from onward_infra, refused without a plain-HTTP endpoint), and its transport and codec are called by
    botocore, by the names
    of its own interfaces (`send`, `serialize_to_request`, `parse`), which the reading does not see. They make
    no SDK call of their own, so the policies the reading grants are the same with or without them."""
    monkeypatch.delenv("ONWARD_CLIENT_WRAPPER", raising=False)


def test_every_api_route_runs_only_code_the_reading_reached(functions_environment) -> None:
    tenant, operator = {"tenant": "acme"}, {"groups": "[onward-operator]"}
    context = LocalLambdaContext("api")

    def call(method: str, path: str, claims: dict[str, str] | None, body: Any = None,
             query: str = "") -> dict[str, Any]:
        names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
        event = http_event(method, path, claims=claims, body=body)
        if query:
            event["rawQueryString"] = query
            event["queryStringParameters"] = dict(pair.split("=", 1) for pair in query.split("&"))
        assert not names
        response: dict[str, Any] = api_app.handler(event, context)
        return response

    def requests() -> None:
        created = call("POST", "/jobs", tenant, {"type": "demo.echo", "params": {"n": 1}})
        assert created["statusCode"] == 202, created
        job_id = __import__("json").loads(created["body"])["job_id"]
        for path in ("", "/runs", "/params", "/explain"):
            call("GET", f"/jobs/{job_id}{path}", tenant)
        call("POST", "/jobs/batch", tenant, {"jobs": [{"type": "demo.echo"}]})
        call("GET", "/jobs", tenant, query="limit=5")
        call("GET", "/jobs/counts", tenant)
        call("GET", "/whoami", tenant)
        call("GET", "/view", tenant)
        call("POST", f"/jobs/{job_id}/cancel", tenant)
        call("POST", f"/jobs/{job_id}/replay", operator)
        call("POST", "/ops/replay", operator, {"job_ids": [job_id]})
        call("POST", "/ops/bulk/replay", operator, {"dry_run": True})
        call("POST", "/ops/bulk/cancel", operator, {"tenant": "acme", "dry_run": True})
        for path in ("/ops/replayable", "/ops/tenants", "/ops/lag", "/ops/parked", "/ops/conflicts"):
            call("GET", path, operator)
        call("POST", "/schedules", tenant, {"name": "nightly", "type": "demo.echo", "rate": "5 minutes"})
        call("GET", "/schedules", tenant)
        call("DELETE", "/schedules/nightly", tenant)
        call("GET", "/health", None)
        call("GET", "/openapi.json", None)

    seen = assert_read(handler_roots("ApiFunction"), requests)
    assert {"onward.api.routes.jobs:create_job", "onward.store.service:JobStore.create"} <= seen


def test_the_scheduled_functions_run_only_code_the_reading_reached(functions_environment) -> None:
    store = Deployment.from_environment().job_store
    store.create("acme", NewJob(type="demo.echo"))
    assert store.claim("w-gone", 0.001) is not None
    time.sleep(0.05)
    scheduled = sample("cloudwatch-scheduled-event")
    assert_read(handler_roots("ReaperFunction"),
                lambda: reaper_app.handler(scheduled, LocalLambdaContext("reaper")))
    assert_read(handler_roots("SchedulerFunction"),
                lambda: scheduler_app.handler(scheduled, LocalLambdaContext("scheduler")))
    for n in range(2):
        store.create("acme", NewJob(type="demo.echo", params={"n": n}))
    seen = assert_read(handler_roots("WorkerFunction"),
                       lambda: worker_app.handler(scheduled, LocalLambdaContext("worker")))
    assert "onward.store.claims:Claimer.claim" in seen  # it claimed (the job itself may run in another process)


@pytest.mark.own_stack  # it puts records on the events stream
def test_the_stream_functions_run_only_code_the_reading_reached(functions_environment, endpoint) -> None:
    job = Deployment.from_environment().job_store.create("acme", NewJob(type="demo.echo")).job
    dynamodb = endpoint.client("dynamodb")
    image = dynamodb.query(TableName=functions_environment["OUTBOX_TABLE"], KeyConditionExpression="job_id = :j",
                           ExpressionAttributeValues={":j": {"S": job.job_id}})["Items"][0]
    event = sample("dynamodb-update")
    record = event["Records"][0]
    record["eventSourceARN"] = outbox_stream_arn(functions_environment, endpoint)
    record["dynamodb"].update(Keys={"job_id": image["job_id"], "version": image["version"]}, NewImage=image,
                              StreamViewType="NEW_IMAGE", SequenceNumber="900000000000000000001")
    event["Records"] = [record, *sample("dynamodb-update")["Records"][1:]]
    assert_read(handler_roots("RelayFunction"), lambda: relay_app.handler(event, LocalLambdaContext("relay")))

    import json

    payloads = [json.dumps(e).encode() for e in (outbox_event(version=3), outbox_event(version=2))] + [b"\xff"]
    events = kinesis_event(payloads, "arn:aws:kinesis:us-east-1:123456789012:stream/events")
    assert_read(handler_roots("ProjectorFunction"),
                lambda: projector_app.handler(events, LocalLambdaContext("projector")))


@pytest.mark.own_stack  # it puts records on the events stream
def test_the_operator_commands_run_only_code_the_reading_reached(stack_environment, capsys, monkeypatch) -> None:
    """Each command's `run` (what `onward <command>` dispatches to once the parser is done: argument parsing
    calls no AWS API and is not traced)."""
    from onward.cli.main import build_parser

    as_on_aws(monkeypatch)

    store = Deployment.from_environment().job_store
    job = store.create("acme", NewJob(type="demo.echo", max_attempts=1)).job
    parsed = [build_parser().parse_args(argv) for argv in (
        ["replay", "--job", job.job_id], ["reconcile"], ["rebuild-view"], ["lag", "--window-s", "0.1"],
        ["tenant", "list"], ["tenant", "set", "acme", "--weight", "2"], ["overlaps", "--since", "2026-01-01T00:00:00Z"],
        ["bulk", "replay"], ["bulk", "cancel", "--tenant", "acme"])]

    def commands() -> None:
        for args in parsed:
            args.run(args)

    seen = assert_read(operator_roots(), commands, excluded=("onward_infra",))
    assert {"onward.cli.main:cmd_reconcile", "onward.cli.bulk:cmd_bulk"} <= seen
