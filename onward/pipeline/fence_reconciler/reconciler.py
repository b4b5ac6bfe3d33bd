"""Applies the fence reconciler's decisions (onward.domain.fence_reconciliation) to the jobs table of the Region
that is home, one stream record at a time, in stream order, with conditional writes, so that a redelivered
record changes nothing twice:

- RESTORE: the old image put back exactly as the stream record carried it, on the condition that the item
  still has an epoch below the restored image's (a later write of the new home, or the restore delivered
  before, fails the condition: nothing is written and it is counted `superseded`); then the late write's
  attempt's run record is marked (once: `fenced_by` is its mark) and the overlap recorded on both runs;
- ADOPT: JobStore.adopt (conditioned on the row's epoch being below e: None when adopted already), only while
  the row is still the record's new image: a row written over since is the later record's to decide (it may be
  a late write over an adopted row, which that record restores: adopting it would write over the adoption).

Records committed in this Region before the fence (`fenced_at`) are skipped: the adoption pass that follows
the fence takes what they wrote, so a mapping started at the stream's trim horizon costs no write for them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from onward.domain.clock import EpochMs, system_clock
from onward.domain.fence_reconciliation import (
    FENCED_BY,
    FENCED_BY_REGION_EPOCH,
    JOB_SK,
    REGION_EPOCH,
    REGION_FAILOVER,
    Action,
    LateWrite,
    decide,
    epoch_of,
    late_write,
    new_home_attempts,
)
from onward.domain.states import RunOutcome
from onward.pipeline.fence_reconciler.late_runs import job_runs, write_late_run
from onward.pipeline.projector.projector import BatchFailure  # (the earliest record that failed)
from onward.store.dynamo.keys import job_pk, run_key
from onward.store.dynamo.running_marks import mark_overlap
from onward.store.ports.write_plans import OverlapMark
from onward.store.region_epoch_cache import EPOCH_CACHE_S, CachedRegionEpoch

Item = dict[str, Any]  # DynamoDB's wire format

_deserializer = TypeDeserializer()
STREAM_TIME_SLACK_MS = 1000
CORRECTED_BY = "corrected_by"  # on a tenant counter: the stream record whose late write was last corrected


def plain(image: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A stream image as plain values (numbers as Decimal, number sets as sets), or None."""
    if image is None:
        return None
    return {name: _deserializer.deserialize(value) for name, value in image.items()}


@dataclass(frozen=True)
class JobsStreamRecord:
    """One record of the jobs table's stream: its images in wire form (None when absent) and when it was
    committed in this Region (epoch ms; DynamoDB Streams' ApproximateCreationDateTime)."""

    sequence_number: str
    old_image: Item | None
    new_image: Item | None
    committed_at: EpochMs


class RegionEpochView(Protocol):
    @property
    def epoch(self) -> int: ...
    @property
    def fenced_at(self) -> EpochMs | None: ...


class RegionAuthority(Protocol):
    """What the reconciler needs of the job store (onward.store.service.JobStore, issue 39's shared interface)."""

    def region_epoch(self) -> Any: ...  # RegionEpoch (onward.domain.regions)

    # Job | None (None: adopted already); `counted` False: the row arrived after the counters' rebuild
    def adopt(self, job_id: str, epoch: int, *, counted: bool = True) -> Any: ...


@dataclass
class ReconcileTally:
    """What a batch did: restored late writes, adopted jobs (`restamped` of them terminal), run records marked
    late, overlaps recorded (pairs), restores and marks found done already (`superseded`: redelivered, or
    the new home wrote since), records skipped (nothing to do, or committed before the fence)."""

    restored: int = 0
    adopted: int = 0
    restamped: int = 0
    marked: int = 0
    overlaps: int = 0
    superseded: int = 0
    skipped: int = 0
    corrected: int = 0  # tenant counters a late write replaced, corrected (fix of issue 39's drill)
    reasons: dict[str, int] = field(default_factory=dict)

    def add(self, other: ReconcileTally) -> None:
        for name in ("restored", "adopted", "restamped", "marked", "overlaps", "superseded", "skipped", "corrected"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for reason, count in other.reasons.items():
            self.reasons[reason] = self.reasons.get(reason, 0) + count


def _condition_failed(error: ClientError) -> bool:
    code: str | None = error.response.get("Error", {}).get("Code")
    return code == "ConditionalCheckFailedException"


class FenceReconciler:
    """The jobs table's stream -> restores and adoptions in the home Region (see the module's docstring)."""

    def __init__(self, client: Any, jobs_table: str, authority: RegionAuthority,
                 clock: Callable[[], EpochMs] = system_clock, epoch_ttl_s: float = EPOCH_CACHE_S) -> None:
        self._db = client
        self._jobs = jobs_table
        self._authority = authority
        self._clock = clock
        # The epoch item, read at most once per `epoch_ttl_s` by a warm reconciler, not once per batch (issue 39's
        # gaps). Safe while the period is under the fence window W: an answer kept from before the raise skips
        # records (as committed before the fence) only while they were committed before raise + period, which is
        # before the adoption pass starts at fenced_at + W; that pass reads what they wrote, as it does for the
        # records committed before the fence. epoch_cache_s keeps the period at or below the authority check, and
        # W is at least the lease plus the check.
        self._epoch = CachedRegionEpoch(authority.region_epoch, epoch_ttl_s)

    def reconcile(self, records: list[JobsStreamRecord], tally: ReconcileTally) -> BatchFailure | None:
        """Reconcile `records` in order, stopping at the first that fails: it and every one after it are to be
        delivered again (a later record of an item must not be applied before an earlier one: a late write's
        restore before the adoption its next record asks for). The epoch item is read at most once per period
        (see __init__)."""
        current: RegionEpochView = self._epoch.current()
        for index, record in enumerate(records):
            try:
                self.reconcile_one(record, current, tally)
            except Exception as error:  # noqa: BLE001 - reported as the batch's partial failure, then redelivered
                return BatchFailure(index, error)
        return None

    def reconcile_one(self, record: JobsStreamRecord, current: RegionEpochView, tally: ReconcileTally) -> None:
        """One record (see the module's docstring). Records committed before the fence are skipped (a second
        of slack: DynamoDB Streams' creation time is rounded down to the second)."""
        if current.epoch == 0 or (current.fenced_at is not None
                                  and record.committed_at + STREAM_TIME_SLACK_MS < current.fenced_at):
            tally.skipped += 1
            return
        decision = decide(plain(record.old_image), plain(record.new_image), current.epoch)
        tally.reasons[decision.reason] = tally.reasons.get(decision.reason, 0) + 1
        if decision.action is Action.NOTHING:
            tally.skipped += 1
        elif decision.action is Action.ADOPT:
            assert decision.job_id is not None and record.new_image is not None
            if not self._still_current(record.new_image):
                tally.superseded += 1  # written over since: the item's later record decides
            # (a row arriving now is one the failover's rebuild of the counters never counted)
            elif self._authority.adopt(decision.job_id, current.epoch, counted=False) is not None:
                tally.adopted += 1
                tally.restamped += decision.terminal
            else:
                tally.superseded += 1
        elif decision.action is Action.CORRECT:
            assert record.new_image is not None and record.old_image is not None
            self._correct(record, decision.corrections or {}, current.epoch, tally)
        elif decision.action is Action.MARK:
            assert decision.job_id is not None
            if decision.late is None or not self._adopted(decision.job_id, current.epoch):
                tally.skipped += 1
            else:
                self._mark_late(decision.late, current.epoch, tally)
        else:
            assert record.old_image is not None and decision.image is not None
            self._restore(record.old_image, epoch_of(decision.image), tally)
            if decision.late is not None:
                self._mark_late(decision.late, current.epoch, tally)

    def _still_current(self, image: Item) -> bool:
        """Whether the row is still the record's new image (its version and epoch): a row written over since
        may be a late write over an adopted row, which the later record restores, never adopts."""
        found = self._db.get_item(TableName=self._jobs, Key={"pk": image["pk"], "sk": image["sk"]},
                                  ConsistentRead=True, ProjectionExpression="version, #re",
                                  ExpressionAttributeNames={"#re": REGION_EPOCH}).get("Item")
        return found is not None and all(found.get(name) == image.get(name) for name in ("version", REGION_EPOCH))

    def _restore(self, image: Item, restored_epoch: int, tally: ReconcileTally) -> None:
        try:
            self._db.put_item(
                TableName=self._jobs, Item=image,
                ConditionExpression="attribute_exists(pk) AND (attribute_not_exists(#re) OR #re < :re)",
                ExpressionAttributeNames={"#re": REGION_EPOCH},
                ExpressionAttributeValues={":re": {"N": str(restored_epoch)}})
        except ClientError as error:
            if not _condition_failed(error):
                raise
            tally.superseded += 1
            return
        tally.restored += 1

    def _mark_late(self, late: LateWrite, epoch: int, tally: ReconcileTally) -> None:
        """Mark the late write's attempt's run record (once) and the overlap with every attempt that ran in
        the new home, on both run records (`onward overlaps` lists them)."""
        runs = job_runs(self._db, self._jobs, late.job_id, plain)
        run = next((run for run in runs if int(run["attempt"]) == late.attempt), None)
        if run is None:  # a late running row with no record: written from the row, marked (issue 34)
            run = write_late_run(self._db, self._jobs, late, late.at if late.at is not None else self._clock())
            if run is None:
                return  # not here yet (or no claim to write): its own record marks it when it arrives
            tally.marked += 1
            runs.append(run)
        if epoch_of(run) < epoch:  # the old home's own run as it is now (a later image may have replaced the
            late = late_write(late.job_id, run) or late  # record's): what it reported is what it says now
        # (a run still of the late epoch is marked too: if it overwrote a run of this epoch, its own record
        # restores that one and marks it again; if it is the old home's own, this is its only mark)
        at = late.at if late.at is not None else self._clock()
        if run.get(FENCED_BY) is None and self._mark_fenced(late, run, at):
            tally.marked += 1
        partners = [other for other in runs
                    if int(other["attempt"]) in new_home_attempts(runs, epoch, late.attempt)]
        for partner in partners:
            began = max(int(partner["claimed_at"]), int(run["claimed_at"]))
            fresh = late.attempt not in set(map(int, partner.get("overlapped_with", set())))
            other = int(partner["attempt"])
            mark_overlap(self._db, self._jobs, late.job_id, other, OverlapMark((late.attempt,), began))
            mark_overlap(self._db, self._jobs, late.job_id, late.attempt, OverlapMark((other,), began))
            tally.overlaps += fresh

    def _correct(self, record: JobsStreamRecord, corrections: Mapping[str, int], epoch: int,
                 tally: ReconcileTally) -> None:
        """A tenant counter a late write replaced: each count ADDed its correction (what the new home added
        since stays), its index keys put back where the late image dropped them, stamped `epoch`; once per
        record (`corrected_by`: the record's sequence number; a later late write replaces the whole item,
        mark and all, and its own record corrects it again)."""
        assert record.new_image is not None
        names = {"#re": REGION_EPOCH, "#cb": CORRECTED_BY}
        values: dict[str, Any] = {":re": {"N": str(epoch)}, ":seq": {"S": record.sequence_number}}
        sets = ["#re = :re", "#cb = :seq"]
        kept = record.old_image or {}
        for pair in (("active_pk", "active_vt"), ("parked_pk", "parked_until")):
            if all(name in kept for name in pair):
                for name in pair:
                    names[f"#{name}"] = name
                    values[f":{name}"] = kept[name]
                    sets.append(f"#{name} = if_not_exists(#{name}, :{name})")
                break  # (an entry is in one index at a time: active, else parked)
        adds = []
        for number, (name, amount) in enumerate(sorted(corrections.items())):
            names[f"#c{number}"] = name
            values[f":c{number}"] = {"N": str(amount)}
            adds.append(f"#c{number} :c{number}")
        expression = f"SET {', '.join(sets)}" + (f" ADD {', '.join(adds)}" if adds else "")
        condition = "attribute_exists(pk) AND (attribute_not_exists(#cb) OR #cb <> :seq)"
        try:
            self._db.update_item(
                TableName=self._jobs, Key={"pk": record.new_image["pk"], "sk": record.new_image["sk"]},
                UpdateExpression=expression, ConditionExpression=condition,
                ExpressionAttributeNames=names, ExpressionAttributeValues=values)
        except ClientError as error:
            if not _condition_failed(error):
                raise
            tally.superseded += 1
            return
        tally.corrected += 1

    def _adopted(self, job_id: str, epoch: int) -> bool:
        """Whether the job's row here is of `epoch` or later (adopted, or created by this home)."""
        row = self._db.get_item(TableName=self._jobs, Key={"pk": {"S": job_pk(job_id)}, "sk": {"S": JOB_SK}},
                                ConsistentRead=True).get("Item")
        return row is not None and epoch_of(plain(row) or {}) >= epoch

    def _mark_fenced(self, late: LateWrite, run: Mapping[str, Any], at: EpochMs) -> bool:
        """The late report on the run record, once (`fenced_by` absent), only on the run as it was read. A
        run the adoption closed `region_failover` becomes `fenced` (its outcome kept as `reclaimed_as`, as
        a zombie's: onward.store.zombie_marks); a run of the new home that shares the late attempt's number
        keeps its outcome and only records the late report."""
        names = {"#fb": FENCED_BY, "#re": REGION_EPOCH}
        values: dict[str, Any] = {":fb": {"S": FENCED_BY_REGION_EPOCH}, ":at": {"N": str(at)},
                                  ":re": {"N": str(epoch_of(run))}}
        sets = ["#fb = :fb", "late_report_at = :at"]
        if late.reported is not None:
            sets.append("late_report = :late")
            values[":late"] = {"S": late.reported.value}
        # (an epoch-0 item has no `region_epoch`: epoch 0 stamps nothing)
        same_epoch = "(attribute_not_exists(#re) OR #re = :re)" if epoch_of(run) == 0 else "#re = :re"
        condition = f"attribute_exists(pk) AND attribute_not_exists(#fb) AND {same_epoch}"
        if run.get("outcome") == REGION_FAILOVER:
            sets += ["outcome = :fenced", "reclaimed_as = :prior"]
            values |= {":fenced": {"S": RunOutcome.FENCED.value}, ":prior": {"S": REGION_FAILOVER}}
            condition += " AND outcome = :prior"
        elif run.get("outcome") is None:  # the old home's attempt, open as it arrived: the fence ended it
            sets.append("outcome = :fenced")
            values[":fenced"] = {"S": RunOutcome.FENCED.value}
            condition += " AND attribute_not_exists(outcome)"
        try:
            self._db.update_item(
                TableName=self._jobs, Key={"pk": {"S": job_pk(late.job_id)},
                                           "sk": {"S": run_key(late.job_id, late.attempt).sk}},
                UpdateExpression="SET " + ", ".join(sets), ConditionExpression=condition,
                ExpressionAttributeNames=names, ExpressionAttributeValues=values)
        except ClientError as error:
            if not _condition_failed(error):
                raise
            return False
        return True
