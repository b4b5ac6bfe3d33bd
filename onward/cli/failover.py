"""`onward failover --to REGION --reason TEXT` (the fenced failover, onward.operator.failover) and `onward
region-status` (the epoch item, the witness, whether this Region is home). Issue 39, docs/regional-recovery.md.

Clients are built for the Region failed over to: AWS's Regional endpoints, or `--endpoint-url` (default
AWS_ENDPOINT_URL) with that Region's name: the embedded endpoint tells Regions by the request's. Exit status:
0 done, 1 a step failed (run it again: it resumes), 2 refused (nothing changed).
"""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import json
import socket
import sys
from collections.abc import Callable
from typing import Any

import botocore.session

from onward.bootstrap import Deployment
from onward.domain.clock import EpochMs, iso, system_clock
from onward.operator.failover import (
    FailoverFailed,
    FailoverPlan,
    FailoverRefused,
    FailoverReport,
    FenceStore,
    Say,
    fail_over,
    prepare,
)
from onward.operator.reconciler_switch import LambdaMappingSwitch
from onward.operator.replication import declare_lost_of, record_home_seen_of
from onward.operator.witness import (
    InvalidWitness,
    WitnessError,
    WitnessRecord,
    WitnessSpec,
    client_factory,
    witness_record,
)
from onward.settings import AuthoritySettings, InvalidSetting, Settings

AddCommand = Callable[[str, str], argparse.ArgumentParser]


def add_failover_commands(command: AddCommand) -> None:
    failover = command("failover", "make REGION the home Region: witness, epoch, traffic, fence window, adoption, "
                       "start (docs/regional-recovery.md); run it from anywhere but the lost home")
    failover.add_argument("--to", required=True, metavar="REGION", help="the Region that becomes home")
    failover.add_argument("--reason", required=True, help="why (kept on the epoch item)")
    failover.add_argument("--fence-window-s", type=float, metavar="SECONDS",
                          help="wait this long after the fence (default: ONWARD_AUTHORITY_LEASE_S + "
                          "ONWARD_AUTHORITY_CHECK_S + 5 s; shorter only for tests and drills)")
    failover.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    failover.add_argument("--declare-lost", action="store_true",
                          help="the old home is lost for good: say so in the report (the status page's banner "
                          "stops waiting for its backlog)")
    failover.add_argument("--health-check-id", help="the home API's Route 53 health check: inverted in step 3 "
                          "(without it the command is printed)")
    failover.add_argument("--reconciler-mapping", metavar="UUID", help="the fence reconciler's event source mapping "
                          "in REGION (the stack output ReconcilerMappingId): enabled after step 2 (without it the "
                          "command is printed)")
    failover.add_argument("--endpoint-url", help="the Region's endpoint (default AWS_ENDPOINT_URL; AWS's when unset)")
    failover.add_argument("--json", action="store_true", help="print the report as one JSON object")
    failover.set_defaults(run=cmd_failover)

    status = command("region-status", "the region epoch item, the witness, and whether this Region is home")
    status.add_argument("--region", help="read this Region's epoch item (default: AWS_REGION)")
    status.add_argument("--endpoint-url", help="the Region's endpoint (default AWS_ENDPOINT_URL)")
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.set_defaults(run=cmd_region_status)


def _regional(region: str, endpoint_url: str | None) -> tuple[Deployment, AuthoritySettings]:
    """The environment's deployment, its clients in `region` (at `endpoint_url` when given)."""
    here = Deployment.from_environment()
    settings: Settings = dataclasses.replace(here.settings, region=region,
                                             endpoint_url=endpoint_url or here.settings.endpoint_url)
    environ = {name: value for name, value in here.environ.items() if name != "ONWARD_WITNESS"}  # no lease here
    return Deployment(settings, environ=environ), AuthoritySettings.from_environment(here.environ)


def _witness(authority: AuthoritySettings, settings: Settings) -> WitnessRecord:
    if authority.witness is None:
        raise FailoverRefused("ONWARD_WITNESS is not set: a failover starts by writing the witness "
                              "(ssm:<region>:/onward/<stack>/home on AWS)")
    try:
        spec = WitnessSpec.parse(authority.witness)
    except InvalidWitness as error:
        raise InvalidSetting(str(error)) from None
    return witness_record(spec, client_factory(authority.witness_endpoint_url or settings.endpoint_url),
                          jobs_table=settings.require("jobs_table") if spec.kind == "table" else None)


def cmd_failover(args: argparse.Namespace) -> int:
    deployment, authority = _regional(args.to, args.endpoint_url)
    settings = deployment.settings
    plan = FailoverPlan(
        to=args.to, reason=args.reason, decided_by=f"{getpass.getuser()}@{socket.gethostname()}",
        fence_window_s=authority.fence_window_s if args.fence_window_s is None else max(0.0, args.fence_window_s),
        home_region=authority.home_region, on_aws=settings.endpoint_url is None,
        health_check_id=args.health_check_id, reconciler_mapping=args.reconciler_mapping,
        known_regions=frozenset(botocore.session.get_session().get_available_regions("dynamodb")))
    say: Callable[[str], None] = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else (
        lambda line: print(line, flush=True))
    try:
        witness = _witness(authority, settings)
        store: FenceStore = deployment.job_store
        prepared = prepare(plan, witness, store)
        say(f"onward failover: {prepared.previous_home} -> {plan.to}, epoch {prepared.epoch} "
            f"(witness {witness.where}, fence window {plan.fence_window_s:g} s)")
        if not args.yes and not _confirmed(plan, prepared.previous_home):
            print("onward failover: not confirmed: nothing changed", file=sys.stderr)
            return 2
        traffic = _Route53() if plan.health_check_id and plan.on_aws else None
        mappings = LambdaMappingSwitch(deployment.client("lambda")) if plan.reconciler_mapping and plan.on_aws else None
        report = fail_over(plan, prepared, witness=witness, store=store, say=say, traffic=traffic, mappings=mappings)
        _record_replication(deployment, report, store.region_epoch().fenced_at, say,
                            f"declared lost: {plan.reason}" if args.declare_lost else None, plan.decided_by)
    except FailoverRefused as error:
        print(f"onward failover: refused: {error}", file=sys.stderr)
        return 2
    except FailoverFailed as error:
        print(f"onward failover: failed: {error}", file=sys.stderr)
        return 1
    document = {**report.document(), "declared_lost": bool(args.declare_lost)}
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        say(f"onward failover: {plan.to} is home at epoch {report.epoch}"
            + (f"; {report.previous_home} declared lost" if args.declare_lost else ""))
    return 0


def _record_replication(deployment: Deployment, report: FailoverReport, fenced_at: EpochMs | None, say: Say,
                        declared_lost: str | None, by: str) -> None:
    """After the fence window: the old home's newest heartbeat this Region received before the fence (what the
    status page's `may_miss_after` is computed from), and with --declare-lost the declaration that the old home's
    writes are lost (onward.operator.replication)."""
    seen = record_home_seen_of(deployment.client("dynamodb"), deployment.settings, report.epoch, fenced_at)
    report.home_seen_through = None if seen is None else iso(seen)
    say(f"   the old home's newest heartbeat received: {report.home_seen_through or 'none'} (statuses it decided "
        "after it may be missing here)")
    if declared_lost is not None:
        declare_lost_of(deployment.client("dynamodb"), deployment.settings, report.epoch, by=by, reason=declared_lost,
                        at=system_clock())


def _confirmed(plan: FailoverPlan, previous_home: str | None) -> bool:
    if not sys.stdin.isatty():
        print("onward failover: not a terminal: pass --yes to confirm", file=sys.stderr)
        return False
    answer = input(f"make {plan.to} home instead of {previous_home}? The old home's processes stop. [y/N] ")
    return answer.strip().lower() in {"y", "yes"}


class _Route53:
    """Route 53's API is global, served from us-east-1; the witness's client settings (signed, fail fast)."""

    def invert_health_check(self, health_check_id: str) -> None:
        client_factory(None)("route53", "us-east-1").update_health_check(HealthCheckId=health_check_id,
                                                                          Inverted=True)


def cmd_region_status(args: argparse.Namespace) -> int:
    here = Deployment.from_environment()
    region = args.region or here.settings.region
    if not region:
        print("onward region-status: no Region: set AWS_REGION or pass --region", file=sys.stderr)
        return 2
    deployment, authority = _regional(region, args.endpoint_url)
    epoch = deployment.job_store.region_epoch()
    document: dict[str, Any] = {"region": region, "epoch": dataclasses.asdict(epoch),
                                "witness": None, "witness_error": None, "witness_at": authority.witness}
    if authority.witness is not None:
        try:
            named = _witness(authority, deployment.settings).read()
            document["witness"] = None if named is None else {"home": named.home, "epoch": named.epoch}
        except (WitnessError, InvalidWitness) as error:
            document["witness_error"] = str(error)
    home = (document["witness"] or {}).get("home") or epoch.home or authority.home_region
    document["home"] = home
    document["this_region_is_home"] = home == region if home else authority.witness is None
    if args.json:
        print(json.dumps(document, indent=2, default=str))
        return 0
    print(f"region       {region}{'  (home)' if document['this_region_is_home'] else ''}")
    print(f"epoch item   epoch {epoch.epoch}, home {epoch.home}, previous {epoch.previous_home}, "
          f"fenced_at {epoch.fenced_at}, adopted_at {epoch.adopted_at}, by {epoch.decided_by}, reason {epoch.reason!r}")
    witness_line = (document["witness_error"] or (f"{document['witness']}" if document["witness"] else "never written")
                    ) if authority.witness else "not configured (one Region)"
    print(f"witness      {authority.witness or '-'}: {witness_line}")
    return 0
