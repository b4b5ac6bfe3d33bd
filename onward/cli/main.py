"""`onward`: the command line. Each command asks the environment's Deployment (onward/bootstrap.py) for the
components it uses and hands them to the core. `onward worker` is the production runtime; the local stack's
commands (`onward up`, `onward endpoint`) are plugged in by the onward-infra distribution (COMMAND_PLUGINS),
which the product never imports."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from onward.bootstrap import Deployment
from onward.cli.arguments import (
    POSITIVE_SECONDS,
    DefaultsShown,
    StopSignals,
    bounded,
    instant,
)
from onward.domain.dispatch import MAX_WEIGHT, MIN_WEIGHT
from onward.runtime.worker import InvalidRegistration, Registry
from onward.store.tenants import MAX_READY_SHARDS, TENANT_CACHE_MS

if TYPE_CHECKING:
    from onward.operator.lag import LagReport

# Commands other distributions add to `onward`: each entry point of this group names a function given
# `command(name, help)` (which answers the new subcommand's parser) that adds its commands. The local stack
# (onward-infra, installed beside the product by `make up` and `make test`) adds `onward up` and `onward endpoint`.
COMMAND_PLUGINS = "onward.commands"
AddCommand = Callable[[str, str], argparse.ArgumentParser]
# The product's own commands (build_parser adds them), for which no plug-in is loaded.
PRODUCT_COMMANDS = frozenset({"worker", "replay", "rebuild-view", "reconcile", "capacity", "lag", "tenant", "bulk",
                              "overlaps", "redrive", "history"})
PRODUCT_COMMANDS |= {"pause", "resume", "pauses", "drain"}  # pause, resume and the drain switch (issue 37)
PRODUCT_COMMANDS |= {"failover", "region-status"}  # the fenced failover and its status (issue 39)
# What the local stack's commands are for, said by `onward --help` and by the command where it is missing.
LOCAL_STACK_COMMANDS = {"up": "run the platform on this machine",
                        "endpoint": "run the embedded AWS endpoint alone and print its exports"}


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
    from onward.runtime import task_protection
    from onward.runtime.pool import WorkerPool

    pool = WorkerPool(Deployment.from_environment().job_store, registry, args.concurrency, args.lease_s,
                      protection=task_protection.from_environment(os.environ))
    signals = StopSignals()  # Ctrl-C stops it as it says, also where it started with SIGINT ignored
    pool.start()
    print(f"onward worker: {args.concurrency} workers running {sorted(registry.types)}; Ctrl-C or SIGTERM "
          f"stops them (running jobs get {args.stop_timeout:g} s to end, then are released)", flush=True)
    signals.wait()
    # The graceful stop (ECS sends SIGTERM, then SIGKILL its StopTimeout later): no claim from now on, the
    # running jobs may end; a second signal releases them at once.
    print(f"onward worker: stopping: no new claims; {pool.running} running jobs get {args.stop_timeout:g} s "
          "to end, then are released (Ctrl-C again: release them now)", flush=True)
    drained = pool.drain(args.stop_timeout, hurried=lambda: signals.count > 1)
    print(f"onward worker: stopped: {drained.ended} of {drained.held} running jobs ended, "
          f"{drained.released} released (not charged an attempt)"
          + (f"; {drained.stuck} workers did not stop" if drained.stuck else ""), flush=True)
    return 0


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

    if args.target_jobs_per_second is not None:
        return _print_stream_sizing(args.target_jobs_per_second, args.json)
    missing = [f"--{name.replace('_', '-')}" for name in ("arrival_rate", "slots", "write_ms", "recovered_write_ms")
               if getattr(args, name) is None]
    if missing:
        print(f"onward capacity: give --target-jobs-per-second, or {', '.join(missing)}", file=sys.stderr)
        return 2
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


def _print_stream_sizing(jobs_per_s: float, as_json: bool) -> int:
    """The TargetJobsPerSecond value that carries `jobs_per_s` and its row of the EventsStreamSizing mapping."""
    import json

    from onward.domain.stream_sizing import size_for, tier_for

    try:
        tier = tier_for(jobs_per_s)
    except ValueError as error:
        print(f"onward capacity: {error}", file=sys.stderr)
        return 2
    sizing = size_for(tier).as_dict()
    if as_json:
        print(json.dumps({"TargetJobsPerSecond": tier, **sizing}))
        return 0
    print(f"{'TargetJobsPerSecond':34} {tier}")
    for name, value in sizing.items():
        print(f"{name:34} {value:,}")
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
    deployment = Deployment.from_environment()
    store = deployment.job_store
    before = deployment.store_reads.tenants([args.tenant]).get(args.tenant)  # read now, not a cached copy
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

    deployment = Deployment.from_environment()
    states = deployment.job_store.tenant_states()
    claims = deployment.recent_claims.count(system_clock(), window_s=CLAIM_WINDOW_S, bucket_s=CLAIM_WINDOW_S)
    report = listing(states, claims)
    print(json.dumps(report) if args.json else listing_text(report))
    return 0


def cmd_overlaps(args: argparse.Namespace) -> int:
    """The jobs whose attempts ran at once since --since (onward.domain.overlaps), from the jobs table's `overlaps`
    index: a table, or (--json) one object. The window starts no earlier than the job retention allows (run
    records older are gone). Exit status 1 when any job is listed, as `onward reconcile` does."""
    from onward.domain.clock import iso, system_clock

    deployment = Deployment.from_environment()
    now = system_clock()
    if args.since > now:
        print("onward overlaps: --since is in the future", file=sys.stderr)
        return 2
    since = max(args.since, now - (deployment.settings.job_retention_days + 1) * 86_400_000)
    jobs = deployment.overlap_reader.since(since, now)
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


# `onward worker --stop-timeout`: under ECS's StopTimeout of 120 s (template.yaml) less the stop grace (5 s),
# the end of an unheeding handler (2 s) and the release's commit (onward.runtime.pool.RELEASE_WAIT_S)
DEFAULT_STOP_TIMEOUT_S = 90.0


def _add_tenant_commands(tenant: argparse.ArgumentParser) -> None:
    """`onward tenant set` and `onward tenant list`."""
    commands = tenant.add_subparsers(dest="tenant_command", required=True)
    set_ = commands.add_parser(
        "set", formatter_class=DefaultsShown, help="change a tenant's weight, cap or ready shards",
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
        "list", formatter_class=DefaultsShown, help="every registered tenant's settings and load",
        description="one row per registered tenant: weight, cap, ready shards, jobs running and waiting, "
        "claims (attempts started) in the last minute and its share of them")
    list_.add_argument("--json", action="store_true", help='print one JSON object: {"tenants": [...], "window": {...}}')
    list_.set_defaults(run=cmd_tenant_list)


def _plugged_in_commands() -> Iterator[Callable[[AddCommand], None]]:
    """The functions of COMMAND_PLUGINS' entry points, in their names' order."""
    for plugin in sorted(entry_points(group=COMMAND_PLUGINS), key=lambda entry: entry.name):
        yield plugin.load()


def build_parser(*, plugged_in: bool = True) -> argparse.ArgumentParser:
    """Every command; without `plugged_in`, only the product's own (no other distribution is imported)."""
    parser = argparse.ArgumentParser(prog="onward", description="Onward background-job platform")
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        # every flag's default is shown by --help
        return commands.add_parser(name, help=help_text, description=help_text, formatter_class=DefaultsShown)

    worker = command("worker", "run a worker pool for the handlers in a module")
    worker_module = os.environ.get("ONWARD_WORKER_MODULE") or None  # the container image's way (Dockerfile)
    worker.add_argument("--module", default=worker_module, required=worker_module is None,
                        help="module with a `registry` (onward.runtime.worker.Registry); without the flag, "
                        "ONWARD_WORKER_MODULE names it")
    worker.add_argument("--concurrency", type=bounded(int, 1, 1024), default=4, help="jobs run at once")
    worker.add_argument("--lease-s", type=POSITIVE_SECONDS, default=30.0,
                        help="lease per claim, renewed every third of it while the job runs")
    worker.add_argument("--stop-timeout", type=bounded(float, 0), metavar="SECONDS",
                        default=os.environ.get("ONWARD_WORKER_STOP_TIMEOUT_S") or DEFAULT_STOP_TIMEOUT_S,
                        help="on SIGTERM or Ctrl-C, how long running jobs may take to end before they are asked "
                        "to stop and released (not charged an attempt); a handler that ignores the stop is ended "
                        "5 s later. Keep it 25 s under the container's stop timeout (ECS: StopTimeout, 120 s). "
                        "ONWARD_WORKER_STOP_TIMEOUT_S sets the default")
    worker.set_defaults(run=cmd_worker)

    replay_ = command("replay", "re-publish outbox events of a window to the events stream")
    replay_.add_argument("--job", help="one job's events")
    replay_.add_argument("--tenant", help="one tenant's events")
    replay_.add_argument("--since", type=instant, help="ISO-8601 with a zone, e.g. 2026-11-30T06:00:00Z or "
                         "2026-11-30T08:00:00+02:00 (inclusive)")
    replay_.add_argument("--until", type=instant, help="ISO-8601 with a zone, inclusive (default: now)")
    replay_.set_defaults(run=cmd_replay)

    rebuild = command("rebuild-view", "rebuild the view from the outbox and compare it")
    rebuild.set_defaults(run=cmd_rebuild_view)

    reconcile = command("reconcile", "report jobs whose view is behind the job table")
    reconcile.add_argument("--threshold-s", type=bounded(float, 0), default=60.0,
                           help="report jobs whose view has been behind for longer than this")
    reconcile.add_argument("--repair", action="store_true", help="re-publish what the view is missing")
    reconcile.set_defaults(run=cmd_reconcile)

    capacity = command("capacity", "backlog, drain time and retention envelope arithmetic; or, with "
                        "--target-jobs-per-second, what template.yaml sizes from that rate")
    capacity.add_argument("--target-jobs-per-second", type=float,
                          help="the platform's peak job rate: print the stream's shards, the Lambda worker's "
                               "concurrency and the alarm threshold its TargetJobsPerSecond tier deploys")
    capacity.add_argument("--arrival-rate", type=float, help="events/s arriving")
    capacity.add_argument("--slots", type=int, help="writes in flight")
    capacity.add_argument("--write-ms", type=float, help="per write while degraded")
    capacity.add_argument("--recovered-write-ms", type=float, help="per write once recovered")
    capacity.add_argument("--observed-after", type=float, default=0.0, help="seconds the backlog had grown")
    capacity.add_argument("--outage", type=float, default=0.0, help="seconds of outage (no completions) after")
    capacity.add_argument("--json", action="store_true", help="print one JSON object")
    capacity.set_defaults(run=cmd_capacity)

    lag = command("lag", "live processing age, backlog, drain time and retention cover")
    lag.add_argument("--window-s", type=POSITIVE_SECONDS, default=5.0, help="seconds between the two samples")
    lag.add_argument("--outbox-retention-days", type=bounded(float, 0, low_inclusive=False),
                     help="the OutboxRetentionDays the stack was deployed with (default: "
                     "ONWARD_OUTBOX_RETENTION_DAYS, else 7)")
    lag.add_argument("--json", action="store_true", help="print one JSON object")
    lag.set_defaults(run=cmd_lag)

    _add_tenant_commands(command("tenant", "set a tenant's dispatch settings, list the tenants' loads"))

    from onward.cli.bulk import add_bulk_commands

    add_bulk_commands(command("bulk", "replay dead jobs or cancel a tenant's jobs by filter, a dry run first"),
                      instant, DefaultsShown)

    overlaps = command("overlaps", "list jobs whose attempts ran at once (a zombie worked while its successor "
                       "ran): their side effects may have happened twice")
    overlaps.add_argument("--since", type=instant, required=True, help="ISO-8601 with a zone, e.g. "
                          "2026-11-30T06:00:00Z (inclusive): overlaps that began from then until now")
    overlaps.add_argument("--json", action="store_true", help='print one JSON object: {"since", "until", "jobs"}')
    overlaps.set_defaults(run=cmd_overlaps)

    from onward.cli.redrive import add_redrive_command

    add_redrive_command(command("redrive", "replay the jobs of parked records (unreadable or poison ones) through "
                                "the outbox, once their cause is fixed"))

    from onward.cli.history import add_history_command

    add_history_command(command("history", "query the run-history archive: a job's attempts, waits, retries, the "
                                "slowest jobs of a day, or SQL of your own"), DefaultsShown)

    from onward.cli.pauses import add_pause_commands  # pause, resume and the drain switch (issue 37)

    add_pause_commands(command)
    importlib.import_module("onward.cli.failover").add_failover_commands(command)  # issue 39: failover

    added: list[str] = []

    def plugged_command(name: str, help_text: str) -> argparse.ArgumentParser:
        added.append(name)
        return command(name, help_text)

    own = set(commands.choices)
    for add_commands in _plugged_in_commands() if plugged_in else ():
        add_commands(plugged_command)
    if not plugged_in:
        added.extend(LOCAL_STACK_COMMANDS)  # not looked for: the command asked for is the product's own
    assert own.isdisjoint(added), f"a plug-in redefines {sorted(own & set(added))}"
    for name in sorted(LOCAL_STACK_COMMANDS.keys() - added):
        missing = command(name, f"{LOCAL_STACK_COMMANDS[name]} (needs the local stack, not installed here)")
        missing.set_defaults(run=_local_stack_missing)
    return parser


def _local_stack_missing(args: argparse.Namespace) -> int:
    print(f"onward {args.command}: the local stack is not installed here (a production install has none): "
          "pip install -e ./infra from a checkout, or run `make up`", file=sys.stderr)
    return 2


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

    arguments = list(sys.argv[1:] if argv is None else argv)
    asked = next((argument for argument in arguments if not argument.startswith("-")), None)
    # The production runtime (`onward worker`) and the operators' commands load no plug-in: a plug-in's
    # imports are loaded only for its own commands, or to list every command (--help).
    parser = build_parser(plugged_in=asked not in PRODUCT_COMMANDS)
    args, unknown = parser.parse_known_args(arguments)
    if unknown and args.run is not _local_stack_missing:
        parser.parse_args(arguments)  # argparse's own message and exit status for what it did not know
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
