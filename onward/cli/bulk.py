"""`onward bulk replay` / `onward bulk cancel`: the bulk operator actions (onward.operator.bulk) from the command line.
Without --apply a command only counts the matching jobs and shows a sample; with it, it acts on each, printing
progress and a final report. Exit status 0; 1 when any job failed; 2 for a filter that cannot work."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from onward.bootstrap import Deployment
from onward.domain.clock import iso
from onward.domain.states import JobState
from onward.operator.bulk import (
    ALLOWED_STATES,
    MAX_JOBS,
    BulkAction,
    BulkFilter,
    BulkKind,
    BulkReport,
    InvalidBulkFilter,
    Progress,
)

NOUNS = {BulkKind.REPLAY: "dead or quarantined", BulkKind.CANCEL: "waiting or running"}


def add_bulk_commands(bulk: argparse.ArgumentParser, instant: Callable[[str], int],
                      formatter: type[argparse.HelpFormatter]) -> None:
    """`onward bulk replay` and `onward bulk cancel`; `instant` parses --since/--until (as `onward replay`)."""
    commands = bulk.add_subparsers(dest="bulk_command", required=True)
    for kind, help_text in ((BulkKind.REPLAY, "queue again the dead and quarantined jobs a filter selects"),
                            (BulkKind.CANCEL, "cancel a tenant's waiting jobs and stop its running ones, as a "
                                              "filter selects")):
        command = commands.add_parser(kind.value, help=help_text, formatter_class=formatter, description=(
            f"{help_text}. Without --apply: count them and show a sample, changing nothing. The jobs are chosen "
            "from the status view (it can be a moment behind): each is moved by the store's own transition, "
            "which skips, with the reason, what no longer applies. At most --max-jobs a run: run it again for the "
            "rest. Exit status 1 when any job failed, 2 for a bad filter."))
        if kind is BulkKind.CANCEL:
            command.add_argument("--tenant", required=True, help="the tenant whose jobs to cancel")
        else:
            command.add_argument("--tenant", help="only this tenant's jobs (default: every registered tenant's)")
        command.add_argument("--type", dest="types", action="append", default=[], metavar="TYPE",
                             help="only jobs of this type; repeat for several (default: every type)")
        command.add_argument("--state", dest="states", action="append", default=[],
                             choices=sorted(state.value for state in ALLOWED_STATES[kind]),
                             help="only jobs in this status; repeat for several (default: all of them)")
        command.add_argument("--since", type=instant, help="only jobs whose current status began at or after this: "
                             "ISO-8601 with a zone, e.g. 2026-11-30T06:00:00Z (inclusive)")
        command.add_argument("--until", type=instant, help="... and at or before this (inclusive; default: now)")
        command.add_argument("--max-jobs", type=_max_jobs, default=MAX_JOBS, metavar="N",
                             help=f"act on at most N jobs, 1 to {MAX_JOBS:,}")
        command.add_argument("--apply", action="store_true", help="act on them (without it: a dry run)")
        command.add_argument("--json", action="store_true", help="print the report as one JSON object (as "
                             f"POST /ops/bulk/{kind.value} answers it), without progress lines")
        command.set_defaults(run=cmd_bulk, kind=kind)


def _max_jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 1 <= value <= MAX_JOBS:
        raise argparse.ArgumentTypeError(f"{text} is out of range: 1 to {MAX_JOBS}")
    return value


def cmd_bulk(args: argparse.Namespace) -> int:
    kind: BulkKind = args.kind
    try:
        where = BulkFilter(kind, args.tenant, frozenset(args.types), frozenset(JobState(s) for s in args.states),
                           args.since, args.until)
    except InvalidBulkFilter as error:
        print(f"onward bulk {kind}: --{error.field}: {error}", file=sys.stderr)
        return 2
    deployment = Deployment.from_environment()
    action = BulkAction(deployment.job_store, deployment.status_view)
    progress = None if args.json or not args.apply else _print_progress
    report = action.run(where, dry_run=not args.apply, max_jobs=args.max_jobs, progress=progress)
    if args.json:
        from onward.api.contract.operators import BulkActionReport

        print(BulkActionReport.of(report).model_dump_json())
    else:
        print(report_text(report, where))
    return 1 if report.failed else 0


def _print_progress(progress: Progress) -> None:
    print(f"  {progress.done:,}/{progress.matched:,} done: {progress.applied:,} applied, {progress.skipped:,} "
          f"skipped, {progress.failed:,} failed", flush=True)


def report_text(report: BulkReport, where: BulkFilter) -> str:
    """What a person reads: the dry run's count, sample and how to apply it, or the run's report."""
    what = f"{NOUNS[report.action]} jobs" if not where.states else f"{' or '.join(sorted(where.states))} jobs"
    scope = [f"tenant {where.tenant_id}" if where.tenant_id else "every tenant"]
    if where.job_types:
        scope.append("type " + ", ".join(sorted(where.job_types)))
    if where.since is not None or where.until is not None:
        scope.append(f"updated {iso(where.since) if where.since is not None else '…'} .. "
                     f"{iso(where.until) if where.until is not None else 'now'}")
    more = (f"more match than the {report.matched:,} selected (--max-jobs): run it again for the rest"
            if report.more else None)
    if report.dry_run:
        lines = [f"{report.matched:,} {what} match ({'; '.join(scope)})"]
        lines += [f"  {job_id}" for job_id in report.sample]
        if report.matched > len(report.sample):
            lines.append(f"  ... and {report.matched - len(report.sample):,} more")
        lines += [more] if more else []
        lines.append(f"dry run: nothing changed. To {report.action} them, run the same command with --apply"
                     if report.matched else "dry run: nothing changed")
        return "\n".join(lines)

    def counts(by: dict[str, int]) -> str:
        return f" ({', '.join(f'{name} {n:,}' for name, n in sorted(by.items()))})" if by else ""

    lines = [f"{report.action} of {report.matched:,} {what} ({'; '.join(scope)}): applied {report.applied:,}"
             f"{counts(report.applied_by_outcome)}, skipped {sum(report.skipped.values()):,}{counts(report.skipped)}, "
             f"failed {report.failed:,}, unprocessed {report.unprocessed:,} in {report.duration_s:.1f} s"]
    lines += [f"  failed {failure.job_id}: {failure.error}" for failure in report.failures]
    lines += [more] if more else []
    if report.stopped == "failures":
        lines.append("stopped: too many failures in a row (is the store failing?); run it again once it answers")
    return "\n".join(lines)
