"""`onward rate-limits set|list|delete`: a tenant's rate limits as an operator sets and reads them
(onward.store.rate_limits; the same as `PUT/GET/DELETE /rate-limits/{key}`; docs/flow-control.md). Written to the
deployment's jobs table directly, as `onward tenant set` writes settings: claims use a change within
RATE_LIMIT_CACHE_MS."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from onward.bootstrap import Deployment
from onward.domain.clock import iso
from onward.domain.errors import InvalidRequest
from onward.store.ports.rate_buckets import RateLimitDefinition
from onward.store.rate_limits import RATE_LIMIT_CACHE_MS

AddCommand = Callable[[str, str], argparse.ArgumentParser]
KEY_HELP = "`tenant` (every job of the tenant), `type:<job type>`, or a job's own rate_limit_key"
SEEN_WITHIN = f"claims use it within {RATE_LIMIT_CACHE_MS / 1000:g} s"


def add_rate_limit_commands(command: AddCommand) -> None:
    limits = command("rate-limits", "set, list or delete a tenant's rate limits (starts per period, GCRA)")
    commands = limits.add_subparsers(dest="rate_limit_command", required=True)
    put = commands.add_parser("set", help="set one limit: at most LIMIT starts per PERIOD seconds, bursts up to LIMIT")
    put.add_argument("--tenant", required=True, metavar="TENANT")
    put.add_argument("key", metavar="KEY", help=KEY_HELP)
    put.add_argument("--limit", required=True, type=int, metavar="N", help="starts per period (>= 1)")
    put.add_argument("--period", required=True, type=float, metavar="SECONDS", dest="period_s",
                     help="the period in seconds")
    put.set_defaults(run=cmd_set)
    listing = commands.add_parser("list", help="the tenant's limits by key")
    listing.add_argument("--tenant", required=True, metavar="TENANT")
    listing.add_argument("--json", action="store_true", help='print {"rate_limits": [...]} as GET /rate-limits does')
    listing.set_defaults(run=cmd_list)
    remove = commands.add_parser("delete", help="remove one limit (jobs that reserved a token keep their moment)")
    remove.add_argument("--tenant", required=True, metavar="TENANT")
    remove.add_argument("key", metavar="KEY", help=KEY_HELP)
    remove.set_defaults(run=cmd_delete)


def limit_report(tenant_id: str, definition: RateLimitDefinition) -> dict[str, object]:
    """One limit as `list --json` prints it (GET /rate-limits' entries)."""
    return {"key": definition.key, "limit": definition.gcra.limit, "period_s": definition.gcra.period_s,
            "tenant_id": tenant_id, "updated_at": iso(definition.updated_at)}


def cmd_set(args: argparse.Namespace) -> int:
    limits = Deployment.from_environment().job_store.rate_limits
    try:
        definition = limits.put(args.tenant, args.key, args.limit, args.period_s)
    except InvalidRequest as error:
        print(f"onward rate-limits set: {error}", file=sys.stderr)
        return 2
    print(f"tenant {args.tenant}: {definition.key} at most {definition.gcra.limit} starts per "
          f"{definition.gcra.period_s:g} s; {SEEN_WITHIN}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    found = Deployment.from_environment().job_store.rate_limits.list(args.tenant)
    if args.json:
        print(json.dumps({"rate_limits": [limit_report(args.tenant, each) for each in found]}))
        return 0
    for each in found:
        print(f"{each.key:<40} {each.gcra.limit:>8} per {each.gcra.period_s:g} s   set {iso(each.updated_at)}")
    if not found:
        print(f"tenant {args.tenant} has no rate limits")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    if not Deployment.from_environment().job_store.rate_limits.delete(args.tenant, args.key):
        print(f"onward rate-limits delete: tenant {args.tenant} has no limit {args.key!r}", file=sys.stderr)
        return 1
    print(f"tenant {args.tenant}: {args.key} deleted; {SEEN_WITHIN}")
    return 0
