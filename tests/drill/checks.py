"""The drill's audit: pure checks over a DrillHistory (tests/drill/history.py), in the soak's table
(tests/soak/audit.py's Line and Audit: one row per check with its violations, the figures above).

Each check is one invariant of docs/regional-recovery.md that a two-Region failover with a partition could
break; tests/drill/test_checks.py builds a bad history for each and shows the row fail.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from itertools import pairwise

from onward.domain.states import TERMINAL_STATES, RunOutcome
from tests.drill.history import DrillHistory, Execution, Read
from tests.soak.audit import Audit, Line, _line

EPOCH_VERSION_BASE = 2**32  # onward.domain.regions.EPOCH_VERSION_BASE: a version's epoch is above it
TERMINAL = frozenset(state.value for state in TERMINAL_STATES)
# How an attempt that did not decide its job says so on its run record: closed by the adoption, or fenced with
# its late report kept (docs/regional-recovery.md, "A job that was running in the lost Region").
SAYS_IT_RAN_AGAIN = frozenset({"region_failover", RunOutcome.FENCED.value})


def epoch_of(version: int) -> int:
    return version // EPOCH_VERSION_BASE


def rpo_of(lag_s: float, latency_max_s: float) -> float:
    """The drill's recovery point: what the link had not delivered at T, bounded by the larger of its configured
    lag and the longest commit-to-apply time measured before T (CloudWatch's ReplicationLatency), as the design
    bounds it by the replication latency (docs/regional-recovery.md, "RPO and RTO")."""
    return max(lag_s, latency_max_s)


def audit_drill(history: DrillHistory) -> Audit:
    lines: list[Line] = [Line(f"issue 39 part present: {missing.part}", 1, missing.why)
                         for missing in history.missing]
    jobs = history.jobs_b
    cut_ms = history.partitioned_at_ms - int(history.rpo_s * 1000)
    acked_before_rpo = [ack for ack in history.acks if ack.acked_at_ms < cut_ms]
    lines.append(_line("no job lost that was acknowledged before T - RPO",
                       [ack.job_id for ack in acked_before_rpo if ack.job_id not in jobs]))
    lines.append(_line("every acknowledged job is in B after the heal (a partition loses nothing)",
                       [ack.job_id for ack in history.acks if ack.job_id not in jobs]))
    lines.append(_line("no terminal state reopened in B", _reopened(history.reads, history.healed_at_ms)))
    lines.append(_line("no status going backwards in either Region's view", _backwards(history.reads)))
    ran_twice = _ran_twice(history.executions)
    lines.append(_line("every job that ran twice says so on its run records", [
        job_id for job_id, executions in ran_twice.items() if not _recorded(history, job_id, executions)]))
    lines.append(_line("every job whose attempts ran at once is in the overlap report", [
        job_id for job_id, executions in ran_twice.items()
        if _ran_at_once(executions) and job_id not in history.overlap_jobs]))
    lines.append(_old_home_line(history))
    lines.append(_page_line(history))
    lines.append(_line("every job in B finally terminal",
                       [j for j, job in jobs.items() if job.state.value not in TERMINAL]))
    lines.append(_versions_line(history))

    lost_in_rpo = [ack.job_id for ack in history.acks
                   if cut_ms <= ack.acked_at_ms < history.partitioned_at_ms and ack.job_id not in jobs]
    rto = ("none" if history.first_claim_b_ms is None
           else f"{(history.first_claim_b_ms - history.partitioned_at_ms) / 1000:.1f} s")
    regions = sorted({ack.region for ack in history.acks})
    figures: list[tuple[str, int | str]] = [
        ("jobs submitted", history.submitted),
        ("jobs acknowledged", len(history.acks)),
        *((f"  by {region}", sum(1 for ack in history.acks if ack.region == region)) for region in regions),
        ("acknowledged before T - RPO", len(acked_before_rpo)),
        ("RPO (s)", f"{history.rpo_s:.3f}"),
        ("lost within RPO", len(lost_in_rpo)),
        ("jobs in B at the end", len(jobs)),
        ("B rows of a new epoch (adopted or created there)", sum(1 for e in history.epochs_b.values() if e > 0)),
        *((f"attempts run in {role}", sum(1 for e in history.executions if e.region_role == role))
          for role in ("A", "B")),
        ("ran twice", len(ran_twice)),
        ("  of them at once (overlapping attempts)", sum(1 for ex in ran_twice.values() if _ran_at_once(ex))),
        ("in the overlap report", len(history.overlap_jobs)),
        ("reconciled (late writes undone or adopted)", history.reconciled),
        *((f"  B unfinished: {state} at epoch {epoch}", count) for (state, epoch), count in sorted(Counter(
            (job.state.value, history.epochs_b.get(j, 0)) for j, job in jobs.items()
            if job.state.value not in TERMINAL).items())),
        ("RTO measured (T to B's first claim)", rto),
        ("status reads recorded", len(history.reads)),
        ("page reads in B after the failover", len(history.pages)),
    ]
    return Audit(tuple(lines), tuple(figures))


def _reopened(reads: Sequence[Read], healed_at_ms: int | None) -> list[str]:
    """B's job rows read terminal, then read not terminal. A terminal row of an older epoch first read after the
    heal may be a late write of the old home that the reconciler undoes (its adopted image comes back, at a
    higher epoch): that is not a reopening; every other is (a terminal state replicated before T, or decided
    by B)."""
    bad: list[str] = []
    by_job: dict[str, list[Read]] = defaultdict(list)
    for read in reads:
        if read.region_role == "B" and read.source == "row":
            by_job[read.job_id].append(read)
    for job_id, mine in by_job.items():
        terminal_seen: list[Read] = []
        for read in sorted(mine, key=lambda r: r.seq):
            if read.status in TERMINAL:
                terminal_seen.append(read)
                continue
            if any(healed_at_ms is None or t.at_ms < healed_at_ms or epoch_of(t.version) >= epoch_of(read.version)
                   for t in terminal_seen):
                bad.append(job_id)
                break
    return bad


def _backwards(reads: Sequence[Read]) -> list[str]:
    """Per Region, per job: the view's versions in read order never decrease, and a terminal status is never
    followed by another status at the same version."""
    bad: list[str] = []
    by_key: dict[tuple[str, str], list[Read]] = defaultdict(list)
    for read in reads:
        if read.source == "view":
            by_key[(read.region_role, read.job_id)].append(read)
    for (role, job_id), mine in by_key.items():
        previous: Read | None = None
        for read in sorted(mine, key=lambda r: r.seq):
            if previous is not None and (read.version < previous.version or (
                    read.version == previous.version and read.status != previous.status)):
                bad.append(f"{role}:{job_id}")
                break
            previous = read
    return bad


def _ran_twice(executions: Sequence[Execution]) -> dict[str, list[Execution]]:
    """The jobs whose handler ran in more than one attempt, or in both Regions."""
    by_job: dict[str, list[Execution]] = defaultdict(list)
    for execution in executions:
        by_job[execution.job_id].append(execution)
    return {job_id: mine for job_id, mine in by_job.items()
            if len({(e.region_role, e.attempt) for e in mine}) > 1}


def _recorded(history: DrillHistory, job_id: str, executions: list[Execution]) -> bool:
    """B's run records hold every attempt that ran (no two Regions' attempts under one number), and one of
    them says it ran again: closed `region_failover`, or `fenced` with its late report, or a late report."""
    runs = history.runs_b.get(job_id, [])
    attempts = {r.attempt for r in runs}
    numbers = [e.attempt for e in executions]
    regions_of: dict[int, set[str]] = defaultdict(set)
    for e in executions:
        regions_of[e.attempt].add(e.region_role)
    if any(len(regions) > 1 for regions in regions_of.values()):
        return False  # one fencing token used in both Regions: the run records cannot tell the runs apart
    if not set(numbers) <= attempts:
        return False
    return any((r.outcome is not None and r.outcome.value in SAYS_IT_RAN_AGAIN) or r.late_report is not None
               for r in runs)


def _ran_at_once(executions: list[Execution]) -> bool:
    ordered = sorted(executions, key=lambda e: e.started_ms)
    return any(later.started_ms < earlier.ended_ms for earlier, later in pairwise(ordered))


def _old_home_line(history: DrillHistory) -> Line:
    """The old home's processes stop by the authority lease: none of its workers starts an attempt after the
    fence window (the broken worker claimed before T: it is the reconciler's case, not this one's)."""
    check = "the old home started no attempt after the fence window (authority lease)"
    if history.fence_ends_ms is None:
        return Line(check, 1, "no fence: the epoch was not raised")
    return _line(check, [f"{e.job_id}:{e.attempt}" for e in history.executions
                         if e.region_role == "A" and e.started_ms > history.fence_ends_ms])


def _page_line(history: DrillHistory) -> Line:
    """Every page B showed after the failover and before the reconciliation: `stale`, with a replication block
    naming `may_miss_after`."""
    check = "B's page honest until reconciled (stale, replication.may_miss_after)"
    before = [page for page in history.pages if not page.reconciled_by_then]
    if not before:
        return Line(check, 1, "no page read in B between the failover and the reconciliation")
    bad = [page for page in before
           if not page.stale or page.replication is None or not page.replication.get("may_miss_after")]
    detail = f"{len(before)} reads; " + ("replication block absent" if any(p.replication is None for p in bad)
                                         else "stale false or may_miss_after unset" if bad else "all honest")
    return Line(check, len(bad), detail if bad else "")


def _versions_line(history: DrillHistory) -> Line:
    """Every adopted job's version in B is of its epoch (epoch x 2^32 + n) and above every version it had in
    epoch 0, so every reader's "keep the newest" keeps B's."""
    check = "versions in B above every epoch-0 version for adopted jobs"
    adopted = [j for j, epoch in history.epochs_b.items() if epoch > 0 and j in history.jobs_b]
    if not adopted:
        return Line(check, 1, "no job in B carries an epoch above 0: nothing was adopted")
    bad = [j for j in adopted
           if history.jobs_b[j].version < history.epochs_b[j] * EPOCH_VERSION_BASE + 1
           or history.jobs_b[j].version <= history.versions_a.get(j, 0)]
    return _line(check, bad)
