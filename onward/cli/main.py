"""`onward`: the command line. Each command asks the environment's Deployment (onward/bootstrap.py) for the
components it uses and hands them to the core. Only the local-stack commands import onward_infra, lazily, and
only the embedded endpoint loads moto (the `local` extra): `onward worker`, the production runtime, loads
neither, and `onward up --aws` / `--endpoint-url` runs the local platform without moto."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import math
import os
import secrets
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onward.bootstrap import Deployment
from onward.domain.clock import parse_instant
from onward.domain.dispatch import MAX_WEIGHT, MIN_WEIGHT
from onward.domain.models import NewJob
from onward.domain.states import is_terminal
from onward.runtime.worker import InvalidRegistration, Registry
from onward.store.tenants import MAX_READY_SHARDS, TENANT_CACHE_MS

if TYPE_CHECKING:
    from onward.operator.lag import LagReport
    from onward_infra.endpoint import EmbeddedEndpoint, EndpointProcess


def _interrupt() -> None:
    raise KeyboardInterrupt


def _interruptible() -> None:
    """Ctrl-C (SIGINT) raises KeyboardInterrupt even where the process started with SIGINT ignored, as a shell
    starts a background job and its children: EndpointProcess.stop and tests stop a child with SIGINT."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _wait_for_interrupt(stop: threading.Event) -> None:
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        stop.set()


def _require_local_extra(command: str) -> None:
    """Ends the command (exit status 2, how to install it) where the embedded endpoint's moto is missing: a
    production install (`pip install onward`, the container image) has no emulator."""
    from importlib.util import find_spec

    if find_spec("moto") is None:
        print(f"onward {command}: the embedded AWS endpoint needs moto, which this install lacks: "
              "pip install 'onward[local]'" + (" (or run against another endpoint: --endpoint-url URL or --aws)"
                                               if command == "up" else ""), file=sys.stderr)
        raise SystemExit(2)


def cmd_endpoint(args: argparse.Namespace) -> int:
    _require_local_extra("endpoint")
    from onward_infra.endpoint import END_OF_EXPORTS, collect_for_a_large_heap, end_with_parent
    from onward_infra.stack import export_lines

    signal.signal(signal.SIGTERM, lambda *_: _interrupt())  # stop as on Ctrl-C, from the start
    _interruptible()
    end_with_parent()
    try:
        with _embedded_endpoint(args) as endpoint:
            stack = endpoint.deploy()
            collect_for_a_large_heap()
            print("# Onward embedded AWS endpoint on", endpoint.url, _kept_where(args, endpoint.restored),
                  "- paste these lines into a shell:")
            for line in export_lines(stack.environment):
                print(line)
            print(END_OF_EXPORTS, flush=True)
            _wait_for_interrupt(threading.Event())
    except KeyboardInterrupt:
        pass  # asked to stop before it waited for it: the endpoint stopped all the same (its last snapshot)
    return 0


def _embedded_endpoint(args: argparse.Namespace) -> EmbeddedEndpoint:
    """The embedded endpoint the flags describe (topology, retention, data directory), not yet started; a
    data directory that cannot be used ends the command (exit status 2, the reason)."""
    from onward_infra.endpoint import EmbeddedEndpoint
    from onward_infra.snapshots import DataDirectoryInUse, IncompatibleSnapshot

    meter = None
    if args.meter:
        from onward_infra.endpoint import REGION
        from onward_infra.metering import Meter

        meter = Meter(REGION, billing=args.meter == "billing")
    try:
        return EmbeddedEndpoint(port=args.port, stream_shards=args.stream_shards, split_every_s=args.split_every_s,
                                retention_scale=args.retention_scale, data_dir=args.data_dir,
                                snapshot_every_s=args.snapshot_every_s, meter=meter)
    except (DataDirectoryInUse, IncompatibleSnapshot, OSError) as error:
        print(f"onward endpoint: --data-dir: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def _endpoint_process(args: argparse.Namespace) -> EndpointProcess:
    """`onward endpoint` with the flags of `onward up`, started, in a process of its own (a GIL of its own:
    the platform's threads and the emulator do not share one core). It stops after the platform, which
    still writes while it stops. A data directory it cannot use ends the command (exit status 2)."""
    from onward_infra.endpoint import EndpointProcess

    flags = ["--port", str(args.port), "--stream-shards", str(args.stream_shards),
             "--retention-scale", repr(args.retention_scale), "--snapshot-every-s", repr(args.snapshot_every_s)]
    flags += ["--split-every-s", repr(args.split_every_s)] if args.split_every_s else []
    flags += ["--data-dir", str(args.data_dir)] if args.data_dir is not None else []
    try:
        return EndpointProcess(*flags).start()
    except RuntimeError:
        print("onward up: the embedded endpoint did not start (its reason is above)", file=sys.stderr)
        raise SystemExit(2) from None


def _kept_where(args: argparse.Namespace, restored: bool | None = None) -> str:
    if args.data_dir is None:
        return "(state in memory only: --data-dir keeps it)"
    if restored is None:
        return f"(state kept in {args.data_dir})"
    return f"({'state restored from' if restored else 'state kept in'} {args.data_dir})"


def _add_topology_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stream-shards", type=_bounded(int, 1, 64), default=1,
                        help="open shards of each table's DynamoDB stream on the embedded endpoint (AWS has one "
                        "per partition)")
    parser.add_argument("--split-every-s", type=POSITIVE_SECONDS, default=None,
                        help="split one open stream shard in two every that many seconds, as growing AWS "
                        "tables do (default: never)")


MIN_RETENTION_SCALE = 1e-5  # onward_infra.moto_fixes.retention.MIN_SCALE (not imported: it loads moto)


def _add_state_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, metavar="DIR",
                        help="keep the embedded endpoint's state (tables, streams and their positions, Kinesis, "
                        "checkpoints) in DIR and resume from it on the next start; a crash loses at most the "
                        "last --snapshot-every-s seconds of writes, a Ctrl-C nothing (default: in memory only)")
    parser.add_argument("--snapshot-every-s", type=POSITIVE_SECONDS, default=1.0,
                        help="with --data-dir: seconds between snapshots while anything is written")
    parser.add_argument("--retention-scale", type=RETENTION_SCALE, default=1.0, metavar="X",
                        help="the embedded endpoint keeps AWS's retention times X: TTL deletes expired items (within "
                        "a minute times X), DynamoDB stream records are trimmed after 24 h times X, Kinesis "
                        "records after the stream's RetentionPeriodHours times X; for drills, e.g. 0.001 makes "
                        f"24 h into 86.4 s ({MIN_RETENTION_SCALE:g} to 1)")


def cmd_worker(args: argparse.Namespace) -> int:
    try:
        module = importlib.import_module(args.module)
    except InvalidRegistration as error:  # a handler registered with settings the platform refuses
        print(f"onward worker: {args.module}: {error}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        if error.name is None or not f"{args.module}.".startswith(f"{error.name}."):
            raise  # the module was found; something it imports was not: its traceback says what
        print(f"onward worker: no module {args.module!r} here (is the package with its handlers installed?)",
              file=sys.stderr)
        return 2
    registry = getattr(module, "registry", None)
    if not isinstance(registry, Registry):
        print(f"onward worker: {args.module} has no `registry` (an onward.runtime.worker.Registry)", file=sys.stderr)
        return 2
    from onward.runtime.pool import WorkerPool

    pool = WorkerPool(Deployment.from_environment().job_store, registry, args.concurrency, args.lease_s)
    pool.start()
    print(f"onward worker: {args.concurrency} workers running {sorted(registry.types)}; Ctrl-C or SIGTERM "
          f"stops them (running jobs get {args.stop_timeout:g} s to end, then are released)", flush=True)
    _wait_for_interrupt(threading.Event())
    # The graceful stop (ECS sends SIGTERM, then SIGKILL its StopTimeout later): no claim from now on, the
    # running jobs may end; a second signal releases them at once.
    hurry = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: hurry.set())
    print(f"onward worker: stopping: no new claims; {pool.running} running jobs get {args.stop_timeout:g} s "
          "to end, then are released (Ctrl-C again: release them now)", flush=True)
    drained = pool.drain(args.stop_timeout, hurry)
    print(f"onward worker: stopped: {drained.ended} of {drained.held} running jobs ended, "
          f"{drained.released} released (not charged an attempt)"
          + (f"; {drained.stuck} workers did not stop" if drained.stuck else ""), flush=True)
    return 0


DEMO_WORKLOAD: list[tuple[str, NewJob]] = [
    ("acme", NewJob(type="demo.echo", params={"hello": "world"})),
    ("acme", NewJob(type="demo.sleep", params={"seconds": 3})),
    ("acme", NewJob(type="demo.flaky", params={"failures": 1})),
    ("globex", NewJob(type="demo.fail", max_attempts=2)),
    ("globex", NewJob(type="demo.fail", params={"permanent": True})),
    ("globex", NewJob(type="demo.sleep", params={"seconds": 30})),  # cancelled while it runs
    ("initech", NewJob(type="demo.crash", max_attempts=2)),
    ("initech", NewJob(type="demo.echo", params={"n": 42})),
]


DEMO_TENANTS = ("acme", "globex", "initech")


def _tokens(args: argparse.Namespace) -> tuple[dict[str, str], str]:
    """Tenant -> secret from --token TENANT=SECRET, then those a data directory kept, then fresh ones for demo
    tenants without one; and the operator's (given, kept, or fresh). With --data-dir they are kept for the
    next start. Refused at start (exit status 2, the reason, no secret echoed) when they cannot all work."""
    from onward.api.auth import InvalidTokens, parse_tokens

    kept = _kept_tokens(args.data_dir)
    operator = args.operator_token or kept.get("operator") or secrets.token_urlsafe(12)
    try:
        given = parse_tokens(args.token, operator)
        tenants: dict[str, str] = kept.get("tenants", {})
        if args.demo:
            tenants = {tenant: tenants.get(tenant) or secrets.token_urlsafe(12) for tenant in DEMO_TENANTS} | tenants
        tokens = parse_tokens([f"{tenant}={secret}" for tenant, secret in (tenants | given).items()], operator)
    except InvalidTokens as error:
        print(f"onward up: --token / --operator-token: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    if args.data_dir is not None:
        _keep_tokens(args.data_dir, {"operator": operator, "tenants": tokens})
    return tokens, operator


TOKENS_FILE = "tokens.json"  # in a data directory: the secrets `onward up` made, so that a restart keeps them


def _kept_tokens(data_dir: Path | None) -> dict[str, Any]:
    try:
        kept: dict[str, Any] = json.loads((data_dir / TOKENS_FILE).read_text()) if data_dir else {}
    except (FileNotFoundError, ValueError):
        return {}
    return kept


def _keep_tokens(data_dir: Path, tokens: dict[str, Any]) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / TOKENS_FILE
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text(json.dumps(tokens, indent=1))


def _set_log_level(level: str) -> None:
    """The components' structured (JSON) logs at `level`; the progress lines are printed regardless."""
    os.environ["POWERTOOLS_LOG_LEVEL"] = level
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("onward-"):
            logging.getLogger(name).setLevel(level)


def _target_environment(args: argparse.Namespace) -> dict[str, str]:
    """The environment naming the stack's resources on the endpoint `--endpoint-url` / `--aws` chose
    (resource names read from CloudFormation; `--deploy` first creates the data resources)."""
    from botocore.exceptions import ClientError

    from onward_infra.stack import deploy_data_resources, stack_environment

    environment = {"AWS_ENDPOINT_URL": args.endpoint_url} if args.endpoint_url else {}
    cloudformation = Deployment.from_environment({**os.environ, **environment}).client("cloudformation")
    if args.deploy:
        try:
            deploy_data_resources(cloudformation, args.stack)
            print(f"Created the data resources of template.yaml as stack {args.stack}")
        except ClientError as error:
            if error.response["Error"]["Code"] != "AlreadyExistsException":
                raise
            print(f"Stack {args.stack} exists; using it")
    try:
        return {**environment, **stack_environment(cloudformation, args.stack)}
    except ClientError as error:
        raise SystemExit(f"onward up: cannot read stack {args.stack!r}: {error.response['Error']['Message']} "
                         "(deploy it with `sam deploy`, or pass --deploy)") from error


def cmd_up(args: argparse.Namespace) -> int:
    """The platform on this machine: worker pool, reaper, heartbeats, relay and projector behind local
    event-source pollers, and the HTTP API, against the embedded endpoint (tables and stream from
    template.yaml) or, with --endpoint-url / --aws, against another endpoint. `--demo` adds a mixed workload
    and follows it to its end."""
    from contextlib import ExitStack

    from onward.runtime.demo_jobs import registry
    from onward_infra.platform import LocalPlatform, PlatformOptions
    from onward_infra.stack import export_lines

    if args.data_dir is not None and (args.endpoint_url or args.aws):
        print("onward up: --data-dir keeps the embedded endpoint's state; with --endpoint-url or --aws the "
              "state is that endpoint's", file=sys.stderr)
        return 2
    if not (args.endpoint_url or args.aws):
        _require_local_extra("up")
    tokens, operator_token = _tokens(args)
    _set_log_level(args.log_level)
    _interruptible()
    stop = threading.Event()
    with ExitStack() as stack:
        if args.endpoint_url or args.aws:
            environment = _target_environment(args)
            where = args.endpoint_url or "AWS (default endpoints and credentials)"
        else:
            endpoint = _endpoint_process(args)
            stack.callback(endpoint.stop)
            environment = endpoint.environment
            # its own endpoint: botocore's validation of each request is left to the endpoint (settings.py)
            os.environ["ONWARD_PARAMETER_VALIDATION"] = "false"
            where = f"embedded AWS endpoint on {endpoint.url} (process {endpoint.pid}) {_kept_where(args)}"
        os.environ.update(environment)  # the handlers read their resources from it, as on Lambda
        os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
        os.environ["ONWARD_TOKENS"] = ",".join(f"{tenant}={secret}" for tenant, secret in tokens.items())
        os.environ["ONWARD_OPERATOR_TOKEN"] = operator_token
        os.environ["ONWARD_STALE_AFTER_S"] = str(args.stale_after_s)
        os.environ["ONWARD_HEARTBEAT_INTERVAL_S"] = str(args.heartbeat_s)
        if args.job_retention_days is not None:
            os.environ["ONWARD_JOB_RETENTION_DAYS"] = str(args.job_retention_days)
        os.environ.setdefault("ONWARD_JOB_TYPES", ",".join(sorted(registry.types)))
        deployment = Deployment.from_environment()
        print(f"Onward: {where}")
        for line in export_lines(environment):
            print("  " + line)
        options = PlatformOptions(workers=args.workers, lease_s=args.lease_s, http_port=args.http_port,
                                  heartbeat_interval_s=args.heartbeat_s, api_environments=args.api_environments)
        platform = stack.enter_context(LocalPlatform(deployment, registry, options))
        print(f"HTTP API and status page: {platform.url}/  (Authorization: Bearer <token>; "
              "OpenAPI at /openapi.json)")
        for tenant, secret in tokens.items():
            print(f"  tenant {tenant:10} token {secret}")
        print(f"  operator          token {operator_token}", flush=True)
        if args.demo:
            _follow_demo(deployment, stop)
        if not args.exit_when_done:
            print("Serving; Ctrl-C stops everything.", flush=True)
            _wait_for_interrupt(stop)
        print("Stopping...", flush=True)
    return 0


def _follow_demo(deployment: Deployment, stop: threading.Event) -> None:
    """Enqueue the demo workload and print progress until every job ended and the view shows it."""
    store, view = deployment.job_store, deployment.status_view
    jobs = [store.create(tenant, request).job.job_id for tenant, request in DEMO_WORKLOAD]
    print(f"Enqueued {len(jobs)} demo jobs for tenants {', '.join(DEMO_TENANTS)}")
    started = time.monotonic()
    cancelled = False
    while not stop.is_set():
        states = [store.get(job_id) for job_id in jobs]
        if not cancelled and states[5].state.value == "running":
            print(f"  cancelling {jobs[5]} (running demo.sleep): {store.cancel(jobs[5]).status.value}")
            cancelled = True
        counts = Counter(job.state.value for job in states)
        summary = " ".join(f"{state}={n}" for state, n in sorted(counts.items()))
        print(f"  t={time.monotonic() - started:5.1f}s {summary}", flush=True)
        shown_jobs = [(job, shown) for job in states if (shown := view.get(job.job_id)) is not None]
        if all(is_terminal(job.state) for job in states) and len(shown_jobs) == len(states) and all(
                shown.version == job.version for job, shown in shown_jobs):
            print("All demo jobs reached a terminal state, and the status view shows each one:")
            for job, shown in shown_jobs:
                print(f"  {job.job_id} {job.tenant_id:8} {job.type:11} {job.state.value:12} "
                      f"v{job.version} attempts={job.attempt} view={shown.status.value}/v{shown.version}")
            return
        stop.wait(1.0)


def cmd_replay(args: argparse.Namespace) -> int:
    from onward.pipeline.relay.replay import ReplaySelection, replay

    if args.since is not None and args.until is not None and args.until < args.since:
        print("onward replay: --until is before --since", file=sys.stderr)
        return 2
    selection = ReplaySelection(job_id=args.job, tenant_id=args.tenant, since=args.since, until=args.until)
    deployment = Deployment.from_environment()
    summary = replay(
        deployment.outbox_reader,
        deployment.events_publisher,
        selection,
        progress=lambda done, total: print(f"  published {done}/{total}", flush=True),
    )
    print(f"replay: {summary.selected} events selected, {summary.published} re-published "
          "(already-projected ones become counted duplicates)")
    return 0 if summary.published == summary.selected else 1


def cmd_rebuild_view(args: argparse.Namespace) -> int:
    from onward.pipeline.projector.rebuild import compare

    deployment = Deployment.from_environment()
    diff = compare(deployment.outbox_reader.all(), deployment.status_view.all())
    if diff.identical:
        print(f"rebuild-view: the view rebuilt from the outbox is identical to the live view ({diff.jobs} jobs)")
        return 0
    print(f"rebuild-view: {diff.jobs} jobs in the outbox; {len(diff.missing)} missing from the view, "
          f"{len(diff.different)} different, {len(diff.extra)} in the view only")
    for label, job_ids in (("missing", diff.missing), ("different", diff.different), ("extra", diff.extra)):
        for job_id in job_ids[:20]:
            print(f"  {label}: {job_id}")
    return 1


def cmd_reconcile(args: argparse.Namespace) -> int:
    from onward.domain.clock import system_clock
    from onward.pipeline.relay.reconcile import find_lagging, repair

    deployment = Deployment.from_environment()
    lagging = find_lagging(deployment.job_store.all_jobs(), deployment.status_view, system_clock(),
                           args.threshold_s)
    for lag in lagging:
        shown = "never" if lag.view_version is None else f"v{lag.view_version}"
        print(f"  {lag.job_id}: job v{lag.job_version}, view {shown}, behind for {lag.behind_s:.0f}s")
    print(f"reconcile: {len(lagging)} jobs behind the authority for more than {args.threshold_s:g}s")
    if lagging and args.repair:
        published = repair(lagging, deployment.outbox_reader, deployment.events_publisher)
        print(f"reconcile: re-published {published} events")
        return 0
    return 1 if lagging else 0


def cmd_capacity(args: argparse.Namespace) -> int:
    import json

    from onward.domain.capacity import UNITS, Workload, assess

    try:
        workload = Workload(args.arrival_rate, args.slots, args.write_ms, args.recovered_write_ms,
                            args.observed_after, args.outage)
    except ValueError as error:
        print(f"onward capacity: {error}", file=sys.stderr)
        return 2
    report = assess(workload).as_dict()
    if args.json:
        print(json.dumps(report))
        return 0
    for name, value in report.items():
        shown = "never (arrivals exceed the recovered ceiling)" if value is None else f"{value:,.1f} {UNITS[name]}"
        print(f"{name:24} {shown}")
    return 0


def cmd_lag(args: argparse.Namespace) -> int:
    import json

    probe = Deployment.from_environment().lag_probe(args.outbox_retention_days)
    if not args.json:
        print(f"sampling the pipeline for {args.window_s:g}s...", file=sys.stderr, flush=True)
    report = probe.measure(args.window_s)
    if args.json:
        print(json.dumps(report.as_dict()))
    else:
        print(_lag_text(report))
    return 0 if report.outbox_covers and report.stream_covers else 1


def cmd_tenant_set(args: argparse.Namespace) -> int:
    """Check the flags (exit status 2 with the reason, nothing read or written), then read the tenant's
    settings, replace those given and write them; prints them before and after. Read, then written whole: of
    two operators setting one tenant at the same moment, the later write wins, the other's change is lost."""
    from onward.cli.tenants import change_text, tenant_change
    from onward.domain.errors import InvalidRequest

    try:
        change = tenant_change(args.tenant, args.weight, args.cap, remove_cap=args.no_cap,
                               ready_shards=args.ready_shards)
    except InvalidRequest as error:
        print(f"onward tenant: {error}", file=sys.stderr)
        return 2
    store = Deployment.from_environment().job_store
    before = store.recorder.tenants([args.tenant]).get(args.tenant)  # read now, not a cached copy
    after = change.applied_to(before)
    try:
        store.register_tenant(after)
    except InvalidRequest as error:  # ready shards lowered
        print(f"onward tenant: {error}", file=sys.stderr)
        return 2
    print(change_text(before, after))
    return 0


def cmd_tenant_list(args: argparse.Namespace) -> int:
    """Every registered tenant's settings and counters (as /ops/tenants reads them) and its claims over the
    last minute, as a table or (--json) one object."""
    from onward.cli.tenants import CLAIM_WINDOW_S, listing, listing_text
    from onward.domain.clock import system_clock
    from onward.operator.claim_history import RecentClaims

    deployment = Deployment.from_environment()
    states = deployment.job_store.tenant_states()
    claims = RecentClaims(deployment.client("dynamodb"), deployment.settings.require("outbox_table")).count(
        system_clock(), window_s=CLAIM_WINDOW_S, bucket_s=CLAIM_WINDOW_S)
    report = listing(states, claims)
    print(json.dumps(report) if args.json else listing_text(report))
    return 0


def cmd_overlaps(args: argparse.Namespace) -> int:
    """The jobs whose attempts ran at once since --since (onward.domain.overlaps), from the jobs table's `overlaps`
    index: a table, or (--json) one object. The window starts no earlier than the job retention allows (run
    records older are gone). Exit status 1 when any job is listed, as `onward reconcile` does."""
    from onward.domain.clock import iso, system_clock
    from onward.operator.overlaps import DynamoOverlapIndex, OverlapReader

    deployment = Deployment.from_environment()
    now = system_clock()
    if args.since > now:
        print("onward overlaps: --since is in the future", file=sys.stderr)
        return 2
    since = max(args.since, now - (deployment.settings.job_retention_days + 1) * 86_400_000)
    index = DynamoOverlapIndex(deployment.client("dynamodb"), deployment.settings.require("jobs_table"))
    jobs = OverlapReader(index, deployment.job_store).since(since, now)
    if args.json:
        print(json.dumps({"since": iso(since), "until": iso(now), "jobs": [job.as_dict() for job in jobs]}))
        return 1 if jobs else 0
    for job in jobs:
        print(f"{job.job_id}  tenant {job.tenant_id or '?'}  type {job.type or '?'}")
        for attempt in job.as_dict()["attempts"]:
            until = attempt["active_until"] or "still running"
            print(f"  attempt {attempt['attempt']} ({attempt['worker_id']}, {attempt['outcome'] or 'running'}): "
                  f"{attempt['claimed_at']} .. {until}, overlapped attempt(s) "
                  + ", ".join(map(str, attempt["overlapped_with"])))
    print(f"overlaps: {len(jobs)} jobs whose attempts ran at once (side effects may have happened twice) "
          f"since {iso(since)}")
    return 1 if jobs else 0


def _lag_text(r: LagReport) -> str:
    def seconds(value: float | None, never: str = "unknown") -> str:
        return never if value is None else f"{value:,.1f} s"

    lines = [
        f"processing age       {seconds(r.processing_age_s, 'unknown (a shard has no watermark yet)')}",
        f"relay checkpoint age {seconds(r.relay_age_s, 'unknown (no checkpoint yet)')}",
        f"backlog              {r.backlog:,} events",
        f"arrival rate         {r.arrival_rate_per_s:,.1f} events/s (over {r.window_s:g} s)",
        f"service rate         {r.service_rate_per_s:,.1f} events/s",
        f"projected drain      {seconds(r.drain_s, 'never: arrivals outrun service')}",
        f"retention envelope   {seconds(r.envelope_s, 'unbounded')}",
        f"outbox retention     {r.outbox_retention_s / 3600:,.1f} h: "
        f"{'covers' if r.outbox_covers else 'DOES NOT cover'} 2x the envelope",
        f"stream retention     {r.stream_retention_s / 3600:,.1f} h: "
        f"{'covers' if r.stream_covers else 'DOES NOT cover'} 2x the envelope",
    ]
    lines += [f"  shard {s.shard_id}: watermark {s.watermark or 'none'}, age {seconds(s.age_s)}, "
              f"backlog {s.backlog:,}" for s in r.shards]
    return "\n".join(lines)


def _bounded(kind: type[int | float], low: float, high: float | None = None,
             *, low_inclusive: bool = True) -> Callable[[str], float]:
    """An argparse type: a number of `kind` within [low, high] (or (low, high] without low_inclusive), so
    a value that cannot work is refused at start with the rule, not met later as a spinning loop."""
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if not math.isfinite(value) or value < low or (value == low and not low_inclusive) or (
                high is not None and value > high):
            low_text = f">= {low:g}" if low_inclusive else f"> {low:g}"
            raise argparse.ArgumentTypeError(
                f"{text} is out of range: {low_text}" + ("" if high is None else f" and <= {high:g}"))
        return value

    return parse


class _DefaultsShown(argparse.HelpFormatter):
    """--help shows each flag's default, where it has one worth saying (not None, False or an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default in (None, False, [], argparse.SUPPRESS) or "%(default)" in text:
            return text
        return f"{text} (default: %(default)s)"


PORT = _bounded(int, 0, 65535)
RETENTION_SCALE = _bounded(float, MIN_RETENTION_SCALE, 1)
POSITIVE_SECONDS = _bounded(float, 0, low_inclusive=False)
# `onward worker --stop-timeout`: under ECS's StopTimeout of 120 s (template.yaml) less the stop grace (5 s),
# the end of an unheeding handler (2 s) and the release's commit (onward.runtime.pool.RELEASE_WAIT_S)
DEFAULT_STOP_TIMEOUT_S = 90.0


def _instant(text: str) -> int:
    try:
        return parse_instant(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _add_tenant_commands(tenant: argparse.ArgumentParser) -> None:
    """`onward tenant set` and `onward tenant list`."""
    commands = tenant.add_subparsers(dest="tenant_command", required=True)
    set_ = commands.add_parser(
        "set", formatter_class=_DefaultsShown, help="change a tenant's weight, cap or ready shards",
        description="change the settings given, keeping the others as registered (a tenant not registered yet "
        "starts from weight 1, no cap, 1 ready shard), and print them before and after; claims use them "
        f"within {TENANT_CACHE_MS / 1000:g} s (each process caches a tenant's settings that long)")
    set_.add_argument("tenant", metavar="TENANT", help="the tenant id")
    set_.add_argument("--weight", type=float, metavar="W",
                      help="its share of worker time relative to the other tenants with due work "
                      f"({MIN_WEIGHT:g} to {MAX_WEIGHT:g})")
    cap = set_.add_mutually_exclusive_group()
    cap.add_argument("--cap", type=int, metavar="N",
                     help="most of its jobs running at once while other tenants have due work (>= 1)")
    cap.add_argument("--no-cap", action="store_true", help="remove its cap: its fair share alone limits it")
    set_.add_argument("--ready-shards", type=int, metavar="K",
                      help=f"ready-queue shards its new jobs are spread over, and RUNNING counters its attempts "
                      f"(1 to {MAX_READY_SHARDS}): more let more workers claim its jobs at once (each shard takes "
                      "about 250 jobs/s on DynamoDB). It can be raised, not lowered: jobs are queued, and attempts "
                      "counted, under each")
    set_.set_defaults(run=cmd_tenant_set)
    list_ = commands.add_parser(
        "list", formatter_class=_DefaultsShown, help="every registered tenant's settings and load",
        description="one row per registered tenant: weight, cap, ready shards, jobs running and waiting, "
        "claims (attempts started) in the last minute and its share of them")
    list_.add_argument("--json", action="store_true", help='print one JSON object: {"tenants": [...], "window": {...}}')
    list_.set_defaults(run=cmd_tenant_list)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="onward", description="Onward background-job platform")
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        # every flag's default is shown by --help
        return commands.add_parser(name, help=help_text, description=help_text, formatter_class=_DefaultsShown)

    endpoint = command("endpoint", "run the embedded AWS endpoint alone and print its exports")
    endpoint.add_argument("--port", type=PORT, default=4566, help="port on 127.0.0.1 (0: any free port)")
    _add_topology_flags(endpoint)
    _add_state_flags(endpoint)
    endpoint.add_argument("--meter", nargs="?", const="billing", choices=("billing", "requests"),
                          help="meter every request as AWS would bill it (`requests`: count the requests only, no "
                               "units); POST /_onward/meter answers the reading and resets it "
                               "(bench/e2e.py)")
    endpoint.set_defaults(run=cmd_endpoint)

    worker = command("worker", "run a worker pool for the handlers in a module")
    worker_module = os.environ.get("ONWARD_WORKER_MODULE") or None  # the container image's way (Dockerfile)
    worker.add_argument("--module", default=worker_module, required=worker_module is None,
                        help="module with a `registry` (onward.runtime.worker.Registry); without the flag, "
                        "ONWARD_WORKER_MODULE names it")
    worker.add_argument("--concurrency", type=_bounded(int, 1, 1024), default=4, help="jobs run at once")
    worker.add_argument("--lease-s", type=POSITIVE_SECONDS, default=30.0,
                        help="lease per claim, renewed every third of it while the job runs")
    worker.add_argument("--stop-timeout", type=_bounded(float, 0), metavar="SECONDS",
                        default=os.environ.get("ONWARD_WORKER_STOP_TIMEOUT_S") or DEFAULT_STOP_TIMEOUT_S,
                        help="on SIGTERM or Ctrl-C, how long running jobs may take to end before they are asked "
                        "to stop and released (not charged an attempt); a handler that ignores the stop is ended "
                        "5 s later. Keep it 25 s under the container's stop timeout (ECS: StopTimeout, 120 s). "
                        "ONWARD_WORKER_STOP_TIMEOUT_S sets the default")
    worker.set_defaults(run=cmd_worker)

    replay_ = command("replay", "re-publish outbox events of a window to the events stream")
    replay_.add_argument("--job", help="one job's events")
    replay_.add_argument("--tenant", help="one tenant's events")
    replay_.add_argument("--since", type=_instant, help="ISO-8601 with a zone, e.g. 2026-11-30T06:00:00Z or "
                         "2026-11-30T08:00:00+02:00 (inclusive)")
    replay_.add_argument("--until", type=_instant, help="ISO-8601 with a zone, inclusive (default: now)")
    replay_.set_defaults(run=cmd_replay)

    rebuild = command("rebuild-view", "rebuild the view from the outbox and compare it")
    rebuild.set_defaults(run=cmd_rebuild_view)

    reconcile = command("reconcile", "report jobs whose view is behind the job table")
    reconcile.add_argument("--threshold-s", type=_bounded(float, 0), default=60.0,
                           help="report jobs whose view has been behind for longer than this")
    reconcile.add_argument("--repair", action="store_true", help="re-publish what the view is missing")
    reconcile.set_defaults(run=cmd_reconcile)

    capacity = command("capacity", "backlog, drain time and retention envelope arithmetic")
    capacity.add_argument("--arrival-rate", type=float, required=True, help="events/s arriving")
    capacity.add_argument("--slots", type=int, required=True, help="writes in flight")
    capacity.add_argument("--write-ms", type=float, required=True, help="per write while degraded")
    capacity.add_argument("--recovered-write-ms", type=float, required=True, help="per write once recovered")
    capacity.add_argument("--observed-after", type=float, default=0.0, help="seconds the backlog had grown")
    capacity.add_argument("--outage", type=float, default=0.0, help="seconds of outage (no completions) after")
    capacity.add_argument("--json", action="store_true", help="print one JSON object")
    capacity.set_defaults(run=cmd_capacity)

    lag = command("lag", "live processing age, backlog, drain time and retention cover")
    lag.add_argument("--window-s", type=POSITIVE_SECONDS, default=5.0, help="seconds between the two samples")
    lag.add_argument("--outbox-retention-days", type=_bounded(float, 0, low_inclusive=False),
                     help="the OutboxRetentionDays the stack was deployed with (default: "
                     "ONWARD_OUTBOX_RETENTION_DAYS, else 7)")
    lag.add_argument("--json", action="store_true", help="print one JSON object")
    lag.set_defaults(run=cmd_lag)

    _add_tenant_commands(command("tenant", "set a tenant's dispatch settings, list the tenants' loads"))

    from onward.cli.bulk import add_bulk_commands

    add_bulk_commands(command("bulk", "replay dead jobs or cancel a tenant's jobs by filter, a dry run first"),
                      _instant, _DefaultsShown)

    overlaps = command("overlaps", "list jobs whose attempts ran at once (a zombie worked while its successor "
                       "ran): their side effects may have happened twice")
    overlaps.add_argument("--since", type=_instant, required=True, help="ISO-8601 with a zone, e.g. "
                          "2026-11-30T06:00:00Z (inclusive): overlaps that began from then until now")
    overlaps.add_argument("--json", action="store_true", help='print one JSON object: {"since", "until", "jobs"}')
    overlaps.set_defaults(run=cmd_overlaps)

    up = command("up", "run the platform on this machine")
    up.add_argument("--port", type=PORT, default=4566, help="port of the embedded AWS endpoint on 127.0.0.1")
    _add_topology_flags(up)
    _add_state_flags(up)
    up.add_argument("--http-port", type=PORT, default=8000, help="port of the HTTP API on 127.0.0.1")
    up.add_argument("--demo", action="store_true", help="enqueue a mixed demo workload and follow it")
    up.add_argument("--token", action="append", default=[], metavar="TENANT=SECRET",
                    help="a tenant's bearer token; repeat for each tenant (one secret per tenant, visible ASCII "
                    "without commas)")
    up.add_argument("--operator-token", metavar="SECRET", help="the operator's token (default: a fresh one, "
                    "printed)")
    up.add_argument("--workers", type=_bounded(int, 0, 256), default=4, help="worker threads (0: none)")
    up.add_argument("--api-environments", type=_bounded(int, 0, 64), default=4, metavar="N",
                    help="processes running the HTTP API's Lambda handler, one request at a time each, as Lambda's "
                    "execution environments (0: in the platform's process, one request at a time in all)")
    up.add_argument("--lease-s", type=POSITIVE_SECONDS, default=3.0,
                    help="lease of each claim, renewed every third of it; a vanished worker's job is "
                    "requeued after it")
    up.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                    help="level of the components' structured logs (WARNING keeps the progress readable)")
    target = up.add_mutually_exclusive_group()
    target.add_argument("--endpoint-url", help="run against this AWS endpoint (another emulator) instead of "
                        "starting the embedded one")
    target.add_argument("--aws", action="store_true", help="run against AWS itself (default credentials chain)")
    up.add_argument("--stack", default="onward", help="with --endpoint-url/--aws: the CloudFormation stack "
                    "whose tables and stream to use")
    up.add_argument("--deploy", action="store_true", help="with --endpoint-url/--aws: first create the "
                    "template's data resources as that stack")
    up.add_argument("--heartbeat-s", type=_bounded(float, 0.1, 3600), default=5.0,
                    help="seconds between pipeline heartbeats (they keep an idle view confirmed fresh)")
    up.add_argument("--stale-after-s", type=POSITIVE_SECONDS, default=30.0,
                    help="freshness objective: past it plus one heartbeat interval, the API and the page say "
                    "updates are delayed")
    up.add_argument("--job-retention-days", type=_bounded(int, 1, 36500), metavar="DAYS",
                    help="how long a finished job's items and view row are kept (ONWARD_JOB_RETENTION_DAYS; default: "
                    "its value, else 30); a stack that runs for days needs few days: memory grows with the jobs kept")
    up.add_argument("--exit-when-done", action="store_true", help="stop once the demo jobs have all ended")
    up.set_defaults(run=cmd_up)
    return parser


# Without a region boto3 cannot build a client, whatever the endpoint: the first thing a command meets when
# nothing points it at a deployment.
_NO_REGION = ("no AWS region is set: run `onward endpoint` and paste its export lines (the embedded endpoint), "
              "or set AWS_REGION and the stack's variables (JOBS_TABLE, OUTBOX_TABLE, ...) for AWS")
_NO_CREDENTIALS = ("no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or run "
                   "`onward endpoint` and paste its export lines (the embedded endpoint)")


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command. An environment that names no deployment, or names one the command cannot reach
    without more variables, ends any command on its first AWS call with exit status 2 and one line saying
    what to set (not botocore's traceback)."""
    from botocore.exceptions import NoCredentialsError, NoRegionError

    from onward.settings import InvalidSetting, MissingSetting

    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run  # each subcommand's cmd_* (set_defaults(run=...))
    try:
        return run(args)
    except (MissingSetting, InvalidSetting, NoRegionError, NoCredentialsError) as error:
        reason = (_NO_REGION if isinstance(error, NoRegionError)
                  else _NO_CREDENTIALS if isinstance(error, NoCredentialsError) else str(error))
        print(f"onward {args.command}: {reason}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
