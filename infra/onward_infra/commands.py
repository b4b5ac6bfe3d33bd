"""The local stack's commands of `onward` (plugged in through the `onward.commands` entry point):
`onward endpoint` runs the embedded AWS endpoint alone and prints its exports; `onward up` runs the whole
platform on this machine against it (or against another endpoint, or AWS). Only the embedded endpoint loads
moto: `onward up --aws` / `--endpoint-url` runs without it."""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onward.bootstrap import Deployment
from onward.cli.arguments import (
    PORT,
    POSITIVE_SECONDS,
    StopSignals,
    bounded,
    interrupt,
    interruptible,
)
from onward.domain.models import NewJob
from onward.domain.states import is_terminal

if TYPE_CHECKING:
    from onward_infra.endpoint import EmbeddedEndpoint, EndpointProcess


LOCAL_WEBHOOK_NETWORKS = "127.0.0.1/32,::1/128"  # what `onward up` lets webhooks reach on this machine

def cmd_endpoint(args: argparse.Namespace) -> int:
    from onward_infra.endpoint import END_OF_EXPORTS, collect_for_a_large_heap, end_with_parent
    from onward_infra.stack import export_lines

    signal.signal(signal.SIGTERM, lambda *_: interrupt())  # stop as on Ctrl-C, from the start
    interruptible()
    end_with_parent()
    try:
        with _embedded_endpoint(args) as endpoint:
            stack = endpoint.deploy()
            collect_for_a_large_heap()
            signals = StopSignals()  # a Ctrl-C from here on, even during the print, stops it as it says
            print("# Onward embedded AWS endpoint on", endpoint.url, _kept_where(args, endpoint.restored),
                  "- paste these lines into a shell:")
            for line in export_lines(stack.environment):
                print(line)
            print(END_OF_EXPORTS, flush=True)
            signals.wait()
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
    parser.add_argument("--stream-shards", type=bounded(int, 1, 64), default=1,
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


RETENTION_SCALE = bounded(float, MIN_RETENTION_SCALE, 1)


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
    tokens, operator_token = _tokens(args)
    _set_log_level(args.log_level)
    interruptible()
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
        os.environ["ONWARD_TENANT_REQUESTS_PER_S"] = repr(args.tenant_requests_per_s)
        if args.job_retention_days is not None:
            os.environ["ONWARD_JOB_RETENTION_DAYS"] = str(args.job_retention_days)
        os.environ.setdefault("ONWARD_JOB_TYPES", ",".join(sorted(registry.types)))
        _export_otlp(args.otlp)  # trace context (issue 38)
        # completion webhooks: a receiver on this machine (http://127.0.0.1:<port>/...) may be registered
        os.environ.setdefault("ONWARD_WEBHOOK_ALLOWED_NETWORKS", LOCAL_WEBHOOK_NETWORKS)
        archive = _archive_directory(args.data_dir, stack)
        deployment = Deployment.from_environment()
        print(f"Onward: {where}")
        for line in export_lines(environment):
            print("  " + line)
        print(f"  run-history archive (Parquet): {archive}")
        if args.otlp:
            print(f"  OpenTelemetry spans and metrics: exported to {args.otlp} (OTLP over HTTP/protobuf)")
        options = PlatformOptions(workers=args.workers, lease_s=args.lease_s, http_port=args.http_port,
                                  heartbeat_interval_s=args.heartbeat_s, api_environments=args.api_environments)
        platform = stack.enter_context(LocalPlatform(deployment, registry, options))
        print(f"HTTP API and status page: {platform.url}/  (Authorization: Bearer <token>; "
              "OpenAPI at /openapi.json)")
        for tenant, secret in tokens.items():
            print(f"  tenant {tenant:10} token {secret}")
        print(f"  operator          token {operator_token}", flush=True)
        _print_pauses(deployment)  # pause, resume and the drain switch (issue 37)
        if args.demo:
            _follow_demo(deployment)
        if not args.exit_when_done:
            signals = StopSignals()  # a Ctrl-C from here on, even during the print, stops as it says
            print("Serving; Ctrl-C stops everything.", flush=True)
            signals.wait()
        print("Stopping...", flush=True)
    return 0


def _export_otlp(url: str | None) -> None:
    """`--otlp URL`: every component exports its spans and metrics to URL (OTLP over HTTP/protobuf), through the
    standard variables (onward.observability.otlp), with intervals for a person watching: spans within a second,
    metrics every 5 s (the SDK's defaults, 5 s and 60 s, are for a production collector)."""
    if url is None:
        return
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = url
    os.environ.setdefault("OTEL_BSP_SCHEDULE_DELAY", "1000")
    os.environ.setdefault("OTEL_METRIC_EXPORT_INTERVAL", "5000")


def _archive_directory(data_dir: Path | None, stack: Any) -> str:
    """Where the archiver writes (ONWARD_ARCHIVE_DIR, unless already set): `<data dir>/archive` with --data-dir,
    kept with the rest of the state; otherwise a temporary directory, removed at stop like the state itself."""
    given = os.environ.get("ONWARD_ARCHIVE_DIR")
    if given:
        return given
    if data_dir is not None:
        directory = str(data_dir / "archive")
    else:
        import shutil
        import tempfile

        directory = tempfile.mkdtemp(prefix="onward-archive-")
        stack.callback(shutil.rmtree, directory, ignore_errors=True)
    os.environ["ONWARD_ARCHIVE_DIR"] = directory
    stack.callback(os.environ.pop, "ONWARD_ARCHIVE_DIR", None)
    return directory


def _follow_demo(deployment: Deployment) -> None:
    """Enqueue the demo workload and print progress until every job ended and the view shows it."""
    store, view = deployment.job_store, deployment.status_view
    jobs = [store.create(tenant, request).job.job_id for tenant, request in DEMO_WORKLOAD]
    print(f"Enqueued {len(jobs)} demo jobs for tenants {', '.join(DEMO_TENANTS)}")
    started = time.monotonic()
    cancelled = False
    while True:  # Ctrl-C ends it (KeyboardInterrupt)
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
        time.sleep(1.0)


def _otlp_url(text: str) -> str:
    """An http(s) URL with a host (the OTLP exporter appends /v1/traces and /v1/metrics to it)."""
    from urllib.parse import urlsplit

    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"not an http(s) URL with a host: {text!r}")
    return text


def cmd_otlp_receiver(args: argparse.Namespace) -> int:
    """A local OTLP/HTTP receiver for `onward up --otlp` (onward.testing.otlp_receiver): one line per span and
    metric point."""
    from onward.testing.otlp_receiver import serve

    serve(args.port)
    return 0


def add_local_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """`onward endpoint`, `onward up` and `onward regions`, added to the product's command line (onward.cli.main)."""
    from onward_infra.replication.command import add_regions_command

    add_regions_command(command)
    endpoint = command("endpoint", "run the embedded AWS endpoint alone and print its exports")
    endpoint.add_argument("--port", type=PORT, default=4566, help="port on 127.0.0.1 (0: any free port)")
    _add_topology_flags(endpoint)
    _add_state_flags(endpoint)
    endpoint.add_argument("--meter", nargs="?", const="billing", choices=("billing", "requests"),
                          help="meter every request as AWS would bill it (`requests`: count the requests only, no "
                               "units); POST /_onward/meter answers the reading and resets it "
                               "(bench/e2e.py)")
    endpoint.set_defaults(run=cmd_endpoint)

    receiver = command("otlp-receiver", "print the OpenTelemetry spans and metrics sent to 127.0.0.1:PORT (OTLP/HTTP)")
    receiver.add_argument("--port", type=PORT, default=4318, help="port on 127.0.0.1 (4318: OTLP/HTTP's)")
    receiver.set_defaults(run=cmd_otlp_receiver)

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
    up.add_argument("--workers", type=bounded(int, 0, 256), default=4, help="worker threads (0: none)")
    up.add_argument("--api-environments", type=bounded(int, 0, 64), default=4, metavar="N",
                    help="processes running the HTTP API's Lambda handler, one request at a time each, as Lambda's "
                    "execution environments (0: in the platform's process, one request at a time in all)")
    up.add_argument("--lease-s", type=POSITIVE_SECONDS, default=3.0,
                    help="lease of each claim, renewed every third of it; a vanished worker's job is "
                    "requeued after it")
    up.add_argument("--otlp", metavar="URL", type=_otlp_url,
                    help="export OpenTelemetry spans and metrics to this OTLP/HTTP endpoint (e.g. "
                    "http://127.0.0.1:4318; `onward otlp-receiver` prints what arrives); sets "
                    "OTEL_EXPORTER_OTLP_ENDPOINT")
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
    up.add_argument("--heartbeat-s", type=bounded(float, 0.1, 3600), default=5.0,
                    help="seconds between pipeline heartbeats (they keep an idle view confirmed fresh)")
    up.add_argument("--stale-after-s", type=POSITIVE_SECONDS, default=30.0,
                    help="freshness objective: past it plus one heartbeat interval, the API and the page say "
                    "updates are delayed")
    up.add_argument("--job-retention-days", type=bounded(int, 1, 36500), metavar="DAYS",
                    help="how long a finished job's items and view row are kept (ONWARD_JOB_RETENTION_DAYS; default: "
                    "its value, else 30); a stack that runs for days needs few days: memory grows with the jobs kept")
    up.add_argument("--tenant-requests-per-s", type=bounded(float, 0), default=0.0, metavar="RATE",
                    help="each tenant's request quota on the HTTP API (ONWARD_TENANT_REQUESTS_PER_S; past it: 429 "
                    "with Retry-After); 0: none")
    up.add_argument("--exit-when-done", action="store_true", help="stop once the demo jobs have all ended")
    up.set_defaults(run=cmd_up)


def _print_pauses(deployment: Deployment) -> None:
    """What holds jobs from starting, when anything does (a --data-dir kept a pause or the drain switch)."""
    from onward.cli.pauses import pauses_text

    switches = deployment.job_store.flow.current()
    if switches.draining or switches.pauses:
        lines = pauses_text(switches).splitlines()
        print(f"Paused ({lines[0]}; `onward drain off`, `onward resume` lift them):")
        for line in lines[1:]:
            print(f"  {line.strip()}", flush=True)
