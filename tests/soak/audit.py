"""The soak's audit: pure checks over what the run left behind (job rows, run records, results, outbox,
status view, Kinesis records, projector counts) and what the driver injected.

Each check is a named line of the audit table with the number of violations it found (0 = holds). The
inputs are plain frozen values, read by the driver after the run; nothing here talks to AWS.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from onward.domain.archive import ArchivedJob
from onward.domain.models import Job, OutboxEvent, Run
from onward.domain.states import TERMINAL_STATES, JobState, RunOutcome


@dataclass(frozen=True)
class KinesisCopy:
    """One record read back from the events stream."""

    shard_id: str
    generation: int  # 0 for a shard the stream started with, 1 for its children after a reshard, ...
    sequence_number: int
    event_id: str
    job_id: str
    version: int


@dataclass(frozen=True)
class ViewRow:
    job_id: str
    status: str
    version: int


@dataclass(frozen=True)
class Snapshot:
    """Everything the audit reads, taken after the run settled."""

    jobs: Mapping[str, Job]
    runs: Mapping[str, Sequence[Run]]  # per job, by attempt
    results: Mapping[str, Any]  # per job whose run record holds a result (issue 34): its value
    outbox: Mapping[str, Sequence[OutboxEvent]]  # per job, by version
    view: Mapping[str, ViewRow]
    kinesis: Sequence[KinesisCopy]
    projected: Mapping[str, int]  # the projector's outcome counts during the run (applied, duplicate, ...)
    handled: Mapping[tuple[str, int], int]  # (shard, sequence number) -> times the projector handled the
    # record, counted at its fault point (crashed batches too)
    archive: Mapping[str, ArchivedJob] | None = None  # each job's newest archived version (LATEST_VERSIONS);
    # None: the run archived nothing (no check)
    archive_rows: int = 0  # records in the archive, redeliveries' copies included


@dataclass(frozen=True)
class Injected:
    """What the driver did on purpose."""

    fired: Mapping[str, int]  # fault kind -> times it fired
    zombie_attempts: frozenset[str]  # fencing tokens of attempts that reported after being reclaimed
    raced_reaper: frozenset[str]  # fencing tokens of attempts that raced the reaper to their report
    cancelled_while_running: frozenset[str]  # jobs whose running attempt was asked to stop
    cancel_answers: Sequence[tuple[str, str, str]]  # (job id, cancel status, job state in the answer)
    restarts: Mapping[str, int] = field(default_factory=dict)  # component -> restarts after injected crashes
    real_errors: Mapping[str, int] = field(default_factory=dict)  # component -> errors nobody injected


@dataclass(frozen=True)
class Line:
    check: str
    violations: int
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.violations == 0


@dataclass(frozen=True)
class Audit:
    lines: tuple[Line, ...]
    figures: tuple[tuple[str, int | str], ...] = field(default=())

    @property
    def ok(self) -> bool:
        return all(line.ok for line in self.lines)

    def failed(self) -> list[Line]:
        return [line for line in self.lines if not line.ok]

    def table(self) -> str:
        """The audit as a text table: figures, then one line per check with its violations."""
        width = max(len(name) for name, _ in self.figures) if self.figures else 10
        out = ["figures", *(f"  {name:<{width}}  {value}" for name, value in self.figures), "",
               "checks"]
        check_width = max(len(line.check) for line in self.lines)
        for line in self.lines:
            mark = "ok  " if line.ok else "FAIL"
            extra = f"  ({line.detail})" if line.detail else ""
            out.append(f"  {mark} {line.check:<{check_width}}  violations={line.violations}{extra}")
        return "\n".join(out)


def _sample(items: Sequence[str], limit: int = 3) -> str:
    return ", ".join(items[:limit]) + (" ..." if len(items) > limit else "")


def _line(check: str, bad: Sequence[str]) -> Line:
    return Line(check, len(bad), _sample(list(bad)) if bad else "")


def audit(snapshot: Snapshot, injected: Injected, submitted: Sequence[str]) -> Audit:
    """Check the run against the invariants; `submitted` are the job ids the driver created."""
    jobs, runs, outbox, view = snapshot.jobs, snapshot.runs, snapshot.outbox, snapshot.view
    lines: list[Line] = []

    lines.append(_line("every submitted job exists", [j for j in submitted if j not in jobs]))
    lines.append(_line("every job is terminal", [j for j, job in jobs.items() if job.state not in TERMINAL_STATES]))
    lines.append(_line("view version and status == job row", [
        j for j, job in jobs.items()
        if (row := view.get(j)) is None or (row.version, row.status) != (job.version, job.state.value)]))
    lines.append(_line("outbox versions are 1..N (N = row version)", [
        j for j, job in jobs.items() if [e.version for e in outbox.get(j, [])] != list(range(1, job.version + 1))]))
    lines.append(_line("one run record per attempt", [
        j for j, job in jobs.items() if [r.attempt for r in runs.get(j, [])] != list(range(1, job.attempt + 1))]))
    lines.append(_line("every run of a terminal job is closed", [
        f"{j}:{r.attempt}" for j, job in jobs.items() if job.state in TERMINAL_STATES
        for r in runs.get(j, []) if r.outcome is None]))

    # Fencing: only the attempt holding the job completes it, and its result carries its token.
    applied_by_fenced: list[str] = []
    for job_id, job in jobs.items():
        job_runs = runs.get(job_id, [])
        succeeded = [r.attempt for r in job_runs if r.outcome is RunOutcome.SUCCEEDED]
        if job.state is JobState.SUCCEEDED:
            result = snapshot.results.get(job_id)
            if succeeded != [job.attempt] or not isinstance(result, dict) or result.get("attempt") != job.attempt:
                applied_by_fenced.append(job_id)
        elif succeeded or job_id in snapshot.results:
            applied_by_fenced.append(job_id)
    lines.append(_line("no completion applied from a fenced attempt", applied_by_fenced))

    fenced_runs = [(j, r) for j, rs in runs.items() for r in rs if r.outcome is RunOutcome.FENCED]
    lines.append(_line("every fenced run keeps the late report and what closed it", [
        f"{j}:{r.attempt}" for j, r in fenced_runs if r.late_report is None or r.reclaimed_as is None]))
    lines.append(_line("every zombie attempt is visible on its run record (fenced)", [
        token for token in injected.zombie_attempts
        if (run := _run_of(runs, token)) is None or run.outcome is not RunOutcome.FENCED]))
    lines.append(_line("a reaper race ends with one winner: worker succeeded or its report fenced", [
        token for token in injected.raced_reaper
        if (run := _run_of(runs, token)) is None or run.outcome not in (RunOutcome.SUCCEEDED, RunOutcome.FENCED)
        or (run.outcome is RunOutcome.FENCED and run.reclaimed_as is not RunOutcome.LEASE_EXPIRED)]))

    # Cancellation: exactly one winner, terminal states absorb.
    cancelled_wrong = [j for j in injected.cancelled_while_running
                       if jobs[j].state not in (JobState.CANCELLED, JobState.SUCCEEDED)]
    lines.append(_line("a cancelled running job ends cancelled or (completion first) succeeded", cancelled_wrong))
    lines.append(_line("'already ended' answers name the job's final state", [
        job_id for job_id, status, state in injected.cancel_answers
        if status == "already_ended" and jobs[job_id].state.value != state]))
    lines.append(_line("a job answered 'cancelled' stays cancelled", [
        job_id for job_id, status, _ in injected.cancel_answers
        if status == "cancelled" and jobs[job_id].state is not JobState.CANCELLED]))

    # Delivery: Kinesis holds every event, per job in version order; the projector's counts add up.
    events = {e.event_id for es in outbox.values() for e in es}
    copies = Counter(c.event_id for c in snapshot.kinesis)
    lines.append(_line("every outbox event reached Kinesis", sorted(events - set(copies))))
    lines.append(_line("nothing in Kinesis that the outbox lacks", sorted(set(copies) - events)))
    lines.append(_line("per job, first deliveries in version order, one shard per reshard generation",
                       _out_of_order(snapshot.kinesis)))
    distinct, total = len(events), len(snapshot.kinesis)
    relay_redeliveries = total - len(set(copies))
    handled = [snapshot.handled.get((c.shard_id, c.sequence_number), 0) for c in snapshot.kinesis]
    projector_redeliveries = sum(times - 1 for times in handled if times > 1)
    lines.append(Line("every Kinesis record reached the projector", sum(1 for times in handled if times == 0)))
    projected = snapshot.projected
    lines.append(Line("projector applied each event exactly once",
                      abs(projected.get("applied", 0) - distinct),
                      f"applied={projected.get('applied', 0)} events={distinct}"))
    reported = projected.get("duplicate", 0) + projected.get("stale", 0)
    lines.append(Line("projector duplicate+stale == injected redeliveries", abs(reported - (relay_redeliveries
                      + projector_redeliveries)), f"reported={reported} relay={relay_redeliveries} "
                      f"projector={projector_redeliveries}"))
    lines.append(Line("relay crashes after PutRecords were redelivered (each re-publishes its batch)",
                      max(0, injected.fired.get("relay.after_put_records", 0) - relay_redeliveries)))
    lines.append(Line("projector crashes mid-batch were redelivered",
                      int(injected.fired.get("projector.mid_batch", 0) > 0 and projector_redeliveries == 0)))
    lines.append(Line("no conflicts, nothing parked", projected.get("conflict", 0) + projected.get("parked", 0)))

    archive = snapshot.archive
    if archive is not None:
        # The authority against the archive: every finished job at its final version, one run per attempt;
        # every job the authority no longer holds (expired) archived all the same.
        lines.append(_line("every finished job is archived at its final version, one run per attempt", [
            j for j, job in jobs.items() if job.state in TERMINAL_STATES and (
                (kept := archive.get(j)) is None or kept.version != job.version or kept.state != job.state.value
                or [r.attempt for r in kept.runs] != list(range(1, job.attempt + 1)))]))
        lines.append(_line("every expired job (gone from the authority) is archived",
                           [j for j in submitted if j not in jobs and j not in archive]))

    states = Counter(job.state.value for job in jobs.values())
    figures: list[tuple[str, int | str]] = [
        ("jobs", len(jobs)), *((f"  {state}", count) for state, count in sorted(states.items())),
        ("attempts (run records)", sum(len(rs) for rs in runs.values())),
        ("fenced runs (zombie reports recorded)", len(fenced_runs)),
        ("outbox events", distinct), ("Kinesis records", total),
        ("  relay redeliveries (Kinesis copies beyond the first)", relay_redeliveries),
        ("  projector redeliveries (records handled again after a crash)", projector_redeliveries),
        *((f"projector {name}", count) for name, count in sorted(projected.items())),
        *((f"fired {kind}", count) for kind, count in sorted(injected.fired.items())),
        *((f"restarts of {name}", count) for name, count in sorted(injected.restarts.items())),
        *((f"errors not injected in {name} (restarted)", count)
          for name, count in sorted(injected.real_errors.items())),
        ("reaper races won by the worker (it completed)", sum(
            1 for t in injected.raced_reaper if (run := _run_of(runs, t)) and run.outcome is RunOutcome.SUCCEEDED)),
        ("reaper races won by the reaper (report fenced)", sum(
            1 for t in injected.raced_reaper if (run := _run_of(runs, t)) and run.outcome is RunOutcome.FENCED)),
        *((("archived jobs (newest versions)", len(archive)), ("archive records (copies included)",
                                                               snapshot.archive_rows)) if archive is not None else ()),
        ("cancels answered", len(injected.cancel_answers)),
        *((f"  {status}", count)
          for status, count in sorted(Counter(s for _, s, _ in injected.cancel_answers).items())),
    ]
    return Audit(tuple(lines), tuple(figures))


def _run_of(runs: Mapping[str, Sequence[Run]], token: str) -> Run | None:
    job_id, _, attempt = token.rpartition(":")
    for run in runs.get(job_id, []):
        if run.attempt == int(attempt):
            return run
    return None


def _out_of_order(copies: Sequence[KinesisCopy]) -> list[str]:
    by_job: dict[str, list[KinesisCopy]] = {}
    for copy in copies:
        by_job.setdefault(copy.job_id, []).append(copy)
    bad: list[str] = []
    for job_id, mine in by_job.items():
        firsts: list[int] = []
        # Consumers read a parent to its end before its children: that is the stream's order across shards.
        for copy in sorted(mine, key=lambda c: (c.generation, c.sequence_number)):
            if copy.version not in firsts:
                firsts.append(copy.version)
        one_per_generation = len({c.shard_id for c in mine}) == len({c.generation for c in mine})
        if not one_per_generation or firsts != list(range(1, len(firsts) + 1)):
            bad.append(job_id)
    return bad
