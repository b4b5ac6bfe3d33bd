"""The fenced failover (issue 39, docs/regional-recovery.md "How it is fenced", steps 1-6), as `onward failover
--to R` runs it: each step told to `say` as it goes, the whole a `FailoverReport`.

1. witness: `{"home": R, "epoch": e}` written over the epoch it replaces (WitnessRaceLost: someone else first);
2. epoch: R's epoch item raised to e (EpochRaceLost: another failover raised it first);
3. traffic: on AWS the home's Route 53 health check inverted (with its id) or the command printed; locally nothing;
4. fence window: wait until `fenced_at + W`: every old-home process has stopped by then (onward.runtime.authority);
5. adoption: R's non-terminal jobs adopted a page at a time, then the tenants' counters rebuilt, then the
   adoption recorded on the epoch item (`adopted_at`): until then R's API answers writes 503 (onward.api.failover_gate);
6. start: what starts in R, printed (the runbook's part: ECS, schedules, event source mappings).

Right after step 2 the fence reconciler's event source mapping in R is enabled (onward.operator.reconciler_switch:
created disabled, it costs nothing before a failover); it starts at its stream's trim horizon, so what replicated
in since the fence is reconciled whenever it is enabled within the stream's 24 h.

A run stopped after step 1 resumes from step 2; one stopped after step 2 (the epoch item names R, its adoption
not recorded) resumes from step 3: adopting again is idempotent (a row adopted already is passed).

Nothing is written before every input is checked (`prepare`): the Region exists, is not home already, the
witness and R's epoch item can be read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from onward.domain.clock import EpochMs, iso
from onward.domain.errors import EpochRaceLost
from onward.domain.regions import RegionEpoch, Witness
from onward.operator.witness import WitnessError, WitnessRaceLost, WitnessRecord
from onward.store.region_fence import AdoptionPage

ADOPTION_PAGE = 100


class FenceStore(Protocol):
    """The store's region fence in the Region failed over to (onward.store.region_fence)."""

    def region_epoch(self) -> RegionEpoch: ...

    def raise_region_epoch(self, to: int, *, home: str, previous_home: str | None, reason: str,
                           decided_by: str) -> RegionEpoch: ...

    def adopt_page(self, epoch: int, *, cursor: str | None = None, limit: int = 100) -> AdoptionPage: ...

    def rebuild_counters(self, epoch: int) -> int: ...

    def mark_adopted(self, epoch: int) -> RegionEpoch: ...


class FailoverRefused(Exception):
    """Bad input (no such Region, already home, the witness or the Region unreachable): nothing was changed."""


class FailoverFailed(Exception):
    """A step failed after the failover began: what was done is in the report; run it again to resume."""


@dataclass(frozen=True)
class FailoverPlan:
    to: str
    reason: str
    decided_by: str
    fence_window_s: float
    home_region: str | None = None  # ONWARD_HOME_REGION: the home while the witness was never written
    on_aws: bool = True  # False: the embedded endpoint (no Route 53, nothing to start but processes)
    health_check_id: str | None = None  # the home API's Route 53 health check, inverted in step 3
    reconciler_mapping: str | None = None  # the fence reconciler's event source mapping in `to` (its UUID)
    known_regions: frozenset[str] | None = None  # None: any name


@dataclass(frozen=True)
class Prepared:
    """What `prepare` read: the failover raises `epoch` from `witness` (None: never written)."""

    witness: Witness | None
    region_epoch: RegionEpoch
    previous_home: str | None
    epoch: int
    resume: bool  # the witness already names the Region at `epoch` (an earlier run stopped after step 1)
    adopting: bool = False  # the epoch item names the Region at `epoch` already, its adoption not recorded (step 3 on)


@dataclass
class FailoverReport:
    to: str
    previous_home: str | None
    epoch: int
    fenced_at: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    adopted: int = 0
    requeued: int = 0
    runs_closed: int = 0
    terminal_restamped: int = 0
    counters_rebuilt: int = 0
    to_start: list[str] = field(default_factory=list)
    home_seen_through: str | None = None  # the old home's newest heartbeat received before the fence (the CLI's)
    reconciler_enabled: bool = False  # the fence reconciler's mapping enabled by this run
    adopted_at: str | None = None  # when the adoption was recorded: R's API accepts writes from then

    def document(self) -> dict[str, Any]:
        return asdict(self)


class TrafficSwitch(Protocol):
    def invert_health_check(self, health_check_id: str) -> None: ...


class MappingSwitch(Protocol):
    def enable(self, mapping_id: str) -> None: ...


Say = Callable[[str], None]


def prepare(plan: FailoverPlan, witness: WitnessRecord, store: FenceStore) -> Prepared:
    """Check every input and read the state; FailoverRefused (nothing changed) when the failover cannot run."""
    if plan.known_regions is not None and plan.to not in plan.known_regions:
        raise FailoverRefused(f"no such Region: {plan.to!r}")
    if not plan.reason.strip():
        raise FailoverRefused("--reason must say why (it is kept on the epoch item)")
    try:
        named = witness.read()
    except WitnessError as error:
        raise FailoverRefused(f"the witness cannot be read, so nothing was changed: {error}") from error
    try:
        current = store.region_epoch()
    except Exception as error:  # any failure to read the Region means: do not start
        raise FailoverRefused(f"{plan.to}'s epoch item cannot be read, so nothing was changed: {error}") from error
    home = named.home if named is not None else (current.home or plan.home_region)
    witness_epoch = 0 if named is None else named.epoch
    if named is not None and named.home == plan.to and current.epoch == named.epoch - 1:
        return Prepared(named, current, current.home or plan.home_region, named.epoch, resume=True)
    if (current.epoch > 0 and current.home == plan.to and current.adopted_at is None
            and (named is None or (named.home == plan.to and named.epoch == current.epoch))):
        return Prepared(named, current, current.previous_home, current.epoch, resume=True, adopting=True)
    if home == plan.to:
        raise FailoverRefused(f"{plan.to} is home already (epoch {max(witness_epoch, current.epoch)})")
    if home is None:
        raise FailoverRefused("the witness was never written and ONWARD_HOME_REGION is not set: which Region is "
                              "home now is unknown")
    return Prepared(named, current, home, max(witness_epoch, current.epoch) + 1, resume=False)


def fail_over(plan: FailoverPlan, prepared: Prepared, *, witness: WitnessRecord, store: FenceStore, say: Say,
              traffic: TrafficSwitch | None = None, mappings: MappingSwitch | None = None,
              clock: Callable[[], EpochMs] | None = None, sleep: Callable[[float], None] = time.sleep
              ) -> FailoverReport:
    """Steps 1-6 (the module's docstring); FailoverFailed when one cannot be done."""
    now = clock or (lambda: EpochMs(int(time.time() * 1000)))
    epoch = prepared.epoch
    report = FailoverReport(to=plan.to, previous_home=prepared.previous_home, epoch=epoch)

    def step(number: int, name: str, line: str, **detail: Any) -> None:
        report.steps.append({"step": number, "name": name, **detail})
        say(f"{number}. {name}: {line}")

    if prepared.resume:
        step(1, "witness", f"names {plan.to} at epoch {epoch} already (resuming)", done=False)
    else:
        try:
            witness.write(Witness(home=plan.to, epoch=epoch), expected_epoch=epoch - 1)
        except WitnessRaceLost as error:
            raise FailoverFailed(f"step 1: another failover wrote the witness first: {error}") from error
        except WitnessError as error:
            raise FailoverFailed(f"step 1: the witness could not be written (nothing changed): {error}") from error
        step(1, "witness", f"{witness.where} names {plan.to} at epoch {epoch}", done=True)

    if prepared.adopting:
        raised = prepared.region_epoch
    else:
        try:
            raised = store.raise_region_epoch(epoch, home=plan.to, previous_home=prepared.previous_home,
                                              reason=plan.reason, decided_by=plan.decided_by)
        except EpochRaceLost as error:
            raise FailoverFailed(f"step 2: {plan.to}'s epoch is no longer {epoch - 1}: another failover raised it "
                                 f"first ({error}); read `onward region-status`") from error
    fenced_at = raised.fenced_at if raised.fenced_at is not None else now()
    report.fenced_at = iso(fenced_at)
    step(2, "epoch", f"{plan.to}'s epoch item {'at' if prepared.adopting else 'raised to'} {epoch}"
         f"{' already, its adoption not recorded (resuming)' if prepared.adopting else ''}, fenced at "
         f"{iso(fenced_at)}", fenced_at=iso(fenced_at))
    report.reconciler_enabled = enable_reconciler(plan, mappings, say)

    _switch_traffic(plan, traffic, step)

    until_ms = fenced_at + int(plan.fence_window_s * 1000)
    step(4, "fence window", f"waiting {plan.fence_window_s:g} s after the fence, until {iso(EpochMs(until_ms))}: "
         "every process of the old home stops within it", window_s=plan.fence_window_s)
    while (left_s := (until_ms - now()) / 1000) > 0:
        sleep(min(left_s, 5.0))
        if left_s > 5.0:
            say(f"   {max(0.0, left_s - 5.0):.0f} s left")

    cursor: str | None = None
    pages = 0
    while True:
        page = store.adopt_page(epoch, cursor=cursor, limit=ADOPTION_PAGE)
        pages += 1
        report.adopted += page.adopted
        report.requeued += page.requeued
        report.runs_closed += page.runs_closed
        report.terminal_restamped += page.terminal_restamped
        say(f"   adoption page {pages}: {report.adopted} jobs adopted ({report.requeued} queued again, "
            f"{report.runs_closed} running attempts closed region_failover, {report.terminal_restamped} ended "
            "jobs restamped)")
        cursor = page.cursor
        if cursor is None:
            break
    report.counters_rebuilt = store.rebuild_counters(epoch)
    try:
        adopted_at = store.mark_adopted(epoch).adopted_at
    except EpochRaceLost as error:
        raise FailoverFailed(f"step 5: {plan.to}'s epoch is no longer {epoch}: another failover raised it since "
                             f"({error}); read `onward region-status`") from error
    report.adopted_at = None if adopted_at is None else iso(adopted_at)
    step(5, "adoption", f"{report.adopted} jobs adopted in {pages} pages; {report.counters_rebuilt} tenants' "
         f"counters rebuilt; adoption recorded at {report.adopted_at}: {plan.to}'s API accepts writes again",
         adopted=report.adopted, pages=pages)

    report.to_start = what_starts(plan)
    step(6, "start", "; ".join(report.to_start), to_start=report.to_start)
    return report


def _switch_traffic(plan: FailoverPlan, traffic: TrafficSwitch | None, step: Callable[..., None]) -> None:
    if not plan.on_aws:
        step(3, "traffic", "nothing to switch locally (each Region's API has its own endpoint)", done=False)
    elif plan.health_check_id and traffic is not None:
        traffic.invert_health_check(plan.health_check_id)
        step(3, "traffic", f"Route 53 health check {plan.health_check_id} inverted: the failover record now "
             f"answers {plan.to}'s API (TTL 60 s)", done=True)
    else:
        command = ("aws route53 update-health-check --health-check-id <the home API's health check> --inverted")
        step(3, "traffic", f"run (the runbook, docs/deploy.md): {command}", done=False, command=command)


def enable_reconciler(plan: FailoverPlan, mappings: MappingSwitch | None, say: Say) -> bool:
    """The fence reconciler's mapping in the new home enabled (True), or what the runbook must run instead. A
    failure to enable does not stop the failover: the mapping starts at its stream's trim horizon whenever it
    is enabled (within the stream's 24 h), so the command printed still reconciles everything."""
    if not plan.on_aws:
        say(f"   fence reconciler: the local stack's poller starts by itself once {plan.to}'s epoch item names it home")
        return False
    command = (f"aws lambda update-event-source-mapping --region {plan.to} --uuid "
               f"{plan.reconciler_mapping or '<the stack output ReconcilerMappingId>'} --enabled")
    if plan.reconciler_mapping and mappings is not None:
        try:
            mappings.enable(plan.reconciler_mapping)
        except Exception as error:  # noqa: BLE001 - the failover goes on; the runbook runs the command
            say(f"   fence reconciler: its mapping could not be enabled ({error}): run {command}")
            return False
        say(f"   fence reconciler: mapping {plan.reconciler_mapping} enabled (it starts at the stream's trim horizon)")
        return True
    say(f"   fence reconciler: run (the runbook, docs/deploy.md): {command}")
    return False


def what_starts(plan: FailoverPlan) -> list[str]:
    """Step 6: what is started in the new home (the runbook does it on AWS)."""
    if not plan.on_aws:
        return [f"start {plan.to}'s platform: `onward up` (or `onward worker`) with AWS_REGION={plan.to} and "
                f"{plan.to}'s endpoint: workers, reaper and scheduler act once the witness names it"]
    return [f"ECS: the worker service's desired count in {plan.to} (the stack's WorkerDesiredCount)",
            "EventBridge: enable the reaper's, scheduler's and Lambda worker's schedules",
            "Lambda: enable the archiver's and webhook matcher's event source mappings (they start at the fence)"]
