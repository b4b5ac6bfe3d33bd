"""`onward history`: the run-history archive's ready-made questions and SQL of one's own
(onward.operator.history): DuckDB over ONWARD_ARCHIVE_DIR locally, Athena over ARCHIVE_DATABASE /
ARCHIVE_TABLE on AWS. Exit status 0 with an answer; 1 for a job the archive does not hold; 2 with no
archive configured or a query the engine refused (its own message)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from onward.domain.archive import ArchivedJob
from onward.domain.clock import iso
from onward.operator.history.questions import DAY, RETRIES, WAITS, day_window, slowest
from onward.operator.history.readers import ArchiveQueryError, ArchiveReader, Table

NOT_CONFIGURED = ("no archive is configured: set ONWARD_ARCHIVE_DIR (the local stack's Parquet directory), or "
                  "ARCHIVE_DATABASE and ARCHIVE_TABLE (the Glue table Athena reads; "
                  "ARCHIVE_WORK_GROUP names the workgroup)")


def _day(text: str) -> str:
    if not DAY.fullmatch(text):
        raise argparse.ArgumentTypeError(f"a day is YYYY-MM-DD, not {text!r}")
    return text


def _today(days_back: int = 0) -> str:
    return (datetime.now(UTC) - timedelta(days=days_back)).strftime("%Y-%m-%d")


def add_history_command(command: argparse.ArgumentParser, defaults_shown: type[argparse.HelpFormatter]) -> None:
    questions = command.add_subparsers(dest="history_command", required=True)

    def question(name: str, help_text: str) -> argparse.ArgumentParser:
        parser = questions.add_parser(name, help=help_text, description=help_text, formatter_class=defaults_shown)
        parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
        return parser

    job = question("job", "one archived job's newest version and its attempts")
    job.add_argument("job_id")
    job.add_argument("--tenant", help="only if it is this tenant's (default: any tenant's)")
    job.add_argument("--since", type=_day, help="it finished on or after this day, YYYY-MM-DD: on Athena only "
                     "the days from then are read (default: every day)")
    job.add_argument("--until", type=_day, help="it finished on or before this day (default: today, UTC)")
    job.set_defaults(run=cmd_history_job)

    waits = question("waits", WAITS.about)
    waits.add_argument("--since", type=_day, default=None, help="first day, YYYY-MM-DD (default: 6 days ago)")
    waits.add_argument("--until", type=_day, default=None, help="last day, YYYY-MM-DD (default: today, UTC)")
    waits.set_defaults(run=cmd_history_question)

    retries = question("retries", RETRIES.about)
    retries.add_argument("--since", type=_day, default=None, help="first day, YYYY-MM-DD (default: 6 days ago)")
    retries.add_argument("--until", type=_day, default=None, help="last day, YYYY-MM-DD (default: today, UTC)")
    retries.set_defaults(run=cmd_history_question)

    slow = question("slowest", "the jobs of a day that took longest from created to finished")
    slow.add_argument("--day", type=_day, required=True, help="YYYY-MM-DD (UTC)")
    slow.add_argument("--limit", type=int, default=10, help="how many, 1 to 1000")
    slow.set_defaults(run=cmd_history_question)

    sql = question("sql", "run a query of your own: `jobs` is the newest version of every archived job "
                          "(columns: onward.domain.archive.ArchivedJob)")
    sql.add_argument("query", help='e.g. "SELECT state, count(*) FROM jobs GROUP BY state"')
    sql.set_defaults(run=cmd_history_sql)


def _window(args: argparse.Namespace) -> list[str]:
    return day_window(args.since or _today(6), args.until or _today())


def _reader() -> ArchiveReader | None:
    from onward.bootstrap import Deployment

    return Deployment.from_environment().archive_reader(max_wait_s=300.0)


def _answered(run: Callable[[ArchiveReader, argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Runs a history command on the configured archive: exit 2 with what to set when there is none, or with the
    engine's message when it refuses the query."""
    reader = _reader()
    if reader is None:
        print(f"onward history: {NOT_CONFIGURED}", file=sys.stderr)
        return 2
    try:
        return run(reader, args)
    except (ArchiveQueryError, ValueError) as error:
        print(f"onward history: {error}", file=sys.stderr)
        return 2


def _question(args: argparse.Namespace) -> tuple[str, list[str]]:
    """The SQL of the ready-made question asked and its parameters."""
    if args.history_command == "waits":
        return WAITS.sql, _window(args)
    if args.history_command == "retries":
        return RETRIES.sql, _window(args)
    return slowest(args.limit).sql, [args.day, args.day]


def _ask(reader: ArchiveReader, args: argparse.Namespace) -> int:
    text, parameters = _question(args)
    _print_table(reader.sql(text, parameters), as_json=args.json)
    return 0


def _sql(reader: ArchiveReader, args: argparse.Namespace) -> int:
    _print_table(reader.user_sql(args.query), as_json=args.json)
    return 0


def _job(reader: ArchiveReader, args: argparse.Namespace) -> int:
    days = None
    if args.since or args.until:
        since, until = day_window(args.since or "0000-01-01", args.until or _today())
        days = (since, until)
    found = reader.job(args.job_id, args.tenant, days)
    if found is None:
        print(f"onward history: the archive holds no job {args.job_id}"
              + (f" of tenant {args.tenant}" if args.tenant else ""), file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(found.model_dump(), indent=2))
    else:
        print(job_text(found))
    return 0


def cmd_history_question(args: argparse.Namespace) -> int:
    return _answered(_ask, args)


def cmd_history_sql(args: argparse.Namespace) -> int:
    return _answered(_sql, args)


def cmd_history_job(args: argparse.Namespace) -> int:
    return _answered(_job, args)


def job_text(job: ArchivedJob) -> str:
    def at(ms: int | None) -> str:
        return "-" if ms is None else iso(ms)

    head = [f"job {job.job_id} ({job.type}) of {job.tenant}: {job.state} at version {job.version}, "
            f"{job.attempts} of {job.max_attempts} attempts",
            f"created {at(job.created_ms)}, first claimed {at(job.first_claim_ms)}, finished {at(job.finished_ms)} "
            f"(waited {job.waited_ms} ms, ran {job.ran_ms} ms); archived {at(job.archived_ms)}"]
    if job.last_error_type:
        head.append(f"last error: {job.last_error_type}: {job.last_error_message or ''}")
    runs = Table(["attempt", "worker", "claimed", "finished", "outcome", "error"],
                 [(run.attempt, run.worker_id, at(run.claimed_ms), at(run.finished_ms),
                   run.outcome or run.reclaimed_as or "-", run.error_type or "") for run in job.runs])
    return "\n".join(head) + "\n\n" + table_text(runs)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def table_text(table: Table) -> str:
    """Columns aligned, numbers to the right; `(n rows)` below."""
    cells = [[_cell(value) for value in row] for row in table.rows]
    widths = [max([len(name)] + [len(row[i]) for row in cells]) for i, name in enumerate(table.columns)]
    numeric = [all(isinstance(row[i], int | float) or row[i] is None for row in table.rows) and bool(table.rows)
               for i in range(len(table.columns))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(value.rjust(width) if right else value.ljust(width)
                         for value, width, right in zip(values, widths, numeric, strict=True)).rstrip()

    lines = [line(table.columns), line(["-" * width for width in widths])] + [line(row) for row in cells]
    return "\n".join(lines) + f"\n({len(table.rows)} row{'s' if len(table.rows) != 1 else ''})"


def _print_table(table: Table, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"columns": table.columns, "rows": [list(row) for row in table.rows]}, default=str))
    else:
        print(table_text(table))
