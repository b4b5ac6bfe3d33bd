"""`onward redrive`: replay the jobs of parked records (unreadable or poison ones) through the outbox once their
cause is fixed (onward.operator.redrive), then what the mappings gave up: the windows their on-failure queues name
(onward.operator.failure_queues; RELAY_FAILURES_QUEUE, PROJECTOR_FAILURES_QUEUE, when set). With --dry-run it only
lists what it would replay. Exit status 0 when every selected job's events and every window went out; 1 when some
did not (run it again), or when some records name no job."""

from __future__ import annotations

import argparse

from onward.bootstrap import Deployment
from onward.operator.parked import SOURCES
from onward.operator.redrive import RedriveReport, pending, redrive


def add_redrive_command(command: argparse.ArgumentParser) -> None:
    command.add_argument("--source", choices=SOURCES, action="append",
                         help="only the records this consumer parked (repeatable; default: both)")
    command.add_argument("--dry-run", action="store_true", help="list the jobs it would replay, replay nothing")
    command.set_defaults(run=cmd_redrive)


def cmd_redrive(args: argparse.Namespace) -> int:
    deployment = Deployment.from_environment()
    sources = args.source or list(SOURCES)
    if args.dry_run:
        report = pending(deployment.parked_records, sources, deployment.outbox_reader)
    else:
        report = redrive(deployment.parked_records, deployment.outbox_reader, deployment.events_publisher, sources,
                         progress=lambda job_id, published: print(f"  {job_id}: {published} events re-published",
                                                                  flush=True))
    _print(report, args.dry_run)
    queues_done = _drain_queues(deployment, sources, args.dry_run)
    return 0 if report.complete and not report.orphans and queues_done else 1


def _drain_queues(deployment: Deployment, sources: list[str], dry_run: bool) -> bool:
    """Replay the windows the configured on-failure queues name; whether every message's window went out."""
    whole = True
    for source in sources:
        queue = deployment.failure_queues.get(source)
        if queue is None:
            continue
        if dry_run:
            print(f"redrive: {queue.messages_waiting()} batches the {source}'s mapping gave up wait in its "
                  "on-failure queue")
            continue
        done = queue.replay_skipped_batches(deployment.outbox_reader, deployment.events_publisher)
        print(f"redrive: {done.replayed} of {done.messages} batches the {source}'s mapping gave up replayed from "
              f"the outbox ({done.published} of {done.selected} events re-published)")
        whole = whole and done.replayed == done.messages
    return whole


def _print(report: RedriveReport, dry_run: bool) -> None:
    for job_id, records in report.jobs.items():
        print(f"  {job_id}: {len(records)} parked record{'s' if len(records) != 1 else ''} "
              f"({', '.join(sorted({r.source for r in records}))})")
    for record in report.orphans:
        print(f"  no job: {record.source} {record.shard_id} {record.sequence_number}: {record.reason[:120]}")
    if dry_run:
        print(f"redrive: {len(report.jobs)} jobs would be replayed through the outbox; "
              f"{len(report.orphans)} parked records name no job the outbox holds (nothing replayed)")
        return
    print(f"redrive: {len(report.jobs)} jobs replayed, {report.published} of {report.selected} events re-published "
          "(versions the view holds become counted duplicates)"
          + (f"; not all out for {', '.join(report.failed_jobs)}: run it again" if report.failed_jobs else "")
          + (f"; {len(report.orphans)} parked records name no job the outbox holds" if report.orphans else ""))
