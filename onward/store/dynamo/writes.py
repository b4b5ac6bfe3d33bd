"""The TransactWriteItems a recorder write (onward.store.ports.write_plans: TransitionWrite / NewJobWrite)
becomes on DynamoDB, each action named by its role (pure: no I/O). onward.store.dynamo.recorder sends them.

The items and keys are onward.store.dynamo.keys' (onward.store.dynamo.plan_items makes them from a plan); here
they are put in DynamoDB's wire format and their conditions become condition expressions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from onward.domain.dispatch import UsageChange
from onward.domain.models import Job, Run
from onward.store.dynamo.attributes import Item, from_item, to_attribute
from onward.store.dynamo.concurrency_keys import slot_actions
from onward.store.dynamo.epoch_stamps import fence_row_update, fenced, stamp
from onward.store.dynamo.keys import (
    LIFT_ATTRIBUTE,
    SERVED_SINCE_RETURN,
    Entity,
    Key,
    active_partition,
    band_attribute,
    job_from_values,
    job_key,
    overlap_partition,
    queue_key,
    run_from_values,
    run_key,
    running_key,
)
from onward.store.dynamo.plan_items import (
    JobRowUpdate,
    RunClose,
    job_row_update,
    new_job_items,
    run_close,
    transition_event,
)
from onward.store.dynamo.rate_items import bucket_move, with_reservation_read
from onward.store.dynamo.unique_keys import unique_actions
from onward.store.ports.concurrency_keys import SlotReturn
from onward.store.ports.index_shards import DEFAULT_ACTIVE_SHARDS
from onward.store.ports.outcomes import Role
from onward.store.ports.write_plans import (
    NewJobWrite,
    OverlapMark,
    QueueEntryUpdate,
    RunningUpdate,
    TransitionWrite,
    WaitingUpdate,
    queue_entry_updates,
)

CONDITIONAL_CHECK_FAILED = "ConditionalCheckFailed"
TRANSACTION_CONFLICT = "TransactionConflict"


def wire_key(key: Key) -> Item:
    """A jobs-table key in DynamoDB's wire format."""
    return {"pk": {"S": key.pk}, "sk": {"S": key.sk}}


def wire_item(values: Mapping[str, Any]) -> Item:
    """An item of onward.store.dynamo.keys (plain values, None only where it is stored as NULL) in the wire format."""
    return {name: to_attribute(value) for name, value in values.items()}


def job_from_item(item: Item) -> tuple[Job, int, int]:
    """The Job a job row (wire format) holds, its ready shards and its running shard."""
    return job_from_values(from_item(item))


def run_from_item(item: Item) -> Run:
    """The run record an item of the jobs table (sk `RUN#<attempt>`) holds."""
    return run_from_values(from_item(item))


class Refused(NamedTuple):
    """One action's reason in a cancelled transaction: its role, the write it belongs to (`subject`: a
    position in the writes of a create_many, None for a single write's actions) and the code."""

    role: Role
    subject: int | None
    code: str


@dataclass
class Transaction:
    """One TransactWriteItems request whose actions remember the role each plays (and, in a batch, which
    write each belongs to), so that the reasons of a cancellation (one per action, in order) are read by role
    and write, never by position."""

    actions: list[dict[str, Any]] = field(default_factory=list)
    roles: list[Role] = field(default_factory=list)
    subjects: list[int | None] = field(default_factory=list)
    # region fence (issue 39): the write whose job row's action is conditioned on its epoch (None: no such action)
    fence: TransitionWrite | None = None

    def add(self, role: Role, action: dict[str, Any], subject: int | None = None) -> None:
        self.actions.append(action)
        self.roles.append(role)
        self.subjects.append(subject)

    def refused(self, response: Mapping[str, Any]) -> list[Refused]:
        """The reasons of a TransactionCanceledException (`response`: the error's) with the role and write of
        each action they name; actions with no reason ("None") are left out."""
        return [Refused(self._refusal_role(role, reason), subject, reason["Code"])
                for role, subject, reason in zip(self.roles, self.subjects, response.get("CancellationReasons", []),
                                                 strict=False)
                if reason.get("Code") and reason.get("Code") != "None"]

    def _refusal_role(self, role: Role, reason: Mapping[str, Any]) -> Role:
        """The job row's refusal is the epoch's (Role.REGION, Role.UNADOPTED) when the row it returned is of
        another epoch; a counter's is the lift's (Role.LIFT) when the item it returned holds one as high."""
        if self.fence is None:
            return role
        if role in (Role.RUNNING, Role.WAITING) and lift_refused(reason, self.fence.running):
            return Role.LIFT
        if role is not Role.JOB:
            return role
        return fenced(reason, self.fence) or role

    def stamped(self, epoch: int) -> Transaction:
        """Every item it puts or updates stamped with the writer's epoch (region fence, issue 39); epoch 0 is
        the attribute's absence, so a deployment that never failed over writes what it always wrote."""
        for action in self.actions if epoch else ():
            stamp(action, epoch)
        return self

    def reasons(self, response: Mapping[str, Any]) -> dict[Role, list[str]]:
        """The codes of a TransactionCanceledException's reasons (`response`: the error's), by role;
        actions with no reason ("None") are left out."""
        by_role: dict[Role, list[str]] = {}
        for role, reason in zip(self.roles, response.get("CancellationReasons", []), strict=False):
            code = reason.get("Code")
            if code and code != "None":
                by_role.setdefault(role, []).append(code)
        return by_role


@dataclass(frozen=True)
class TransitionWrites:
    """Builds the transactions of recorder writes for these tables."""

    jobs_table: str
    outbox_table: str
    active_shards: int = DEFAULT_ACTIVE_SHARDS

    def transition(self, write: TransitionWrite) -> Transaction:
        transaction = Transaction()
        transaction.add(Role.JOB, self.job_update(job_row_update(write)))
        if write.rate is not None:  # rate limits (issue 37): the claim's take, and the reservation it read
            with_reservation_read(transaction.actions[-1], write.rate.reserved_read)
            for move in write.rate.moves:
                transaction.add(Role.RATE, bucket_move(self.jobs_table, write.rate.tenant_id, move))
        # (a claim writes no run record: the row holds its attempt until the transition ending it writes the
        # record whole, issue 34)
        close = run_close(write)
        if close is not None:
            transaction.add(Role.RUN_CLOSED, self.run_close(close))
        running = write.running
        entering = [write.waiting] if write.waiting is not None else []
        if write.concurrency is not None:  # concurrency keys (issue 37): the key's item, a held job put back
            for role, action in slot_actions(self.jobs_table, write.concurrency):
                transaction.add(role, action)
            if isinstance(write.concurrency, SlotReturn) and write.concurrency.release is not None:
                entering.append(write.concurrency.release.waiting)  # (summed with the job's own: one item)
        for entry in queue_entry_updates(entering):
            # the counter of the running shard a claim charges (or an attempt ends on) is on this queue entry:
            # one action, as a transaction names an item once (issue 34)
            if running is not None and on_entry(running, entry):
                role = Role.RUNNING if running.below_cap is not None else Role.WAITING
                transaction.add(role, self.queue_entry_update(entry, running))
                running = None
            else:
                transaction.add(Role.WAITING, self.queue_entry_update(entry))
        if running is not None:
            transaction.add(Role.RUNNING, self.running_update(running))
        transaction.add(Role.OUTBOX, self._put(self.outbox_table, transition_event(write), "job_id"))
        for tenant_id, shard, cap in write.still_at_cap:
            transaction.add(Role.STILL_AT_CAP, self.still_at_cap(tenant_id, shard, cap))
        fence_row_update(transaction.actions[0], write.region_epoch, adopts=write.adopts)  # (issue 39)
        transaction.fence = write
        return transaction.stamped(write.region_epoch)

    def new_job(self, write: NewJobWrite) -> Transaction:
        items = new_job_items(write)
        transaction = Transaction()
        transaction.add(Role.JOB, self._put(self.jobs_table, items.job, "pk"))
        transaction.add(Role.OUTBOX, self._put(self.outbox_table, items.outbox, "job_id"))
        if write.waiting is not None:
            transaction.add(Role.WAITING, self.waiting_update(write.waiting))
        if items.idempotency is not None:
            transaction.add(Role.IDEMPOTENCY, self._put(self.jobs_table, items.idempotency, "pk"))
        if write.unique is not None:  # unique jobs (issue 37)
            for role, action in unique_actions(self.jobs_table, write.job.tenant_id, write.unique):
                transaction.add(role, action)
        return transaction.stamped(write.region_epoch)

    def new_jobs(self, writes: Sequence[NewJobWrite]) -> Transaction:
        """Creates in one transaction: each job's puts (its position in `writes` as their subject), then one
        update per queue entry they enter, their counts summed."""
        transaction = Transaction()
        for position, write in enumerate(writes):
            items = new_job_items(write)
            transaction.add(Role.JOB, self._put(self.jobs_table, items.job, "pk"), position)
            transaction.add(Role.OUTBOX, self._put(self.outbox_table, items.outbox, "job_id"), position)
            if items.idempotency is not None:
                transaction.add(Role.IDEMPOTENCY, self._put(self.jobs_table, items.idempotency, "pk"), position)
            if write.unique is not None:  # unique jobs (issue 37)
                for role, action in unique_actions(self.jobs_table, write.job.tenant_id, write.unique):
                    transaction.add(role, action, position)
        for entry in queue_entry_updates(write.waiting for write in writes if write.waiting is not None):
            transaction.add(Role.WAITING, self.queue_entry_update(entry))
        return transaction.stamped(max((write.region_epoch for write in writes), default=0))

    @staticmethod
    def _put(table: str, item: Mapping[str, Any], key_attribute: str) -> dict[str, Any]:
        """Put `item` only where no item is."""
        return {"Put": {"TableName": table, "Item": wire_item(item),
                        "ConditionExpression": f"attribute_not_exists({key_attribute})"}}

    def job_update(self, row: JobRowUpdate) -> dict[str, Any]:
        names = {f"#a{i}": name for i, name in enumerate([*row.set, *row.remove])}
        aliases = {name: alias for alias, name in names.items()}
        values = {f":v{i}": to_attribute(value) for i, value in enumerate(row.set.values())}
        clauses = []
        if row.set:
            clauses.append("SET " + ", ".join(f"{aliases[n]} = :v{i}" for i, n in enumerate(row.set)))
        if row.remove:
            clauses.append("REMOVE " + ", ".join(aliases[n] for n in row.remove))
        state, version, attempt = row.expected
        names |= {"#state": "state", "#version": "version", "#attempt": "attempt"}
        values |= {
            ":expected_state": {"S": state.value},
            ":expected_version": {"N": str(version)},
            ":expected_attempt": {"N": str(attempt)},
        }
        # (not held aside: onward.store.held_jobs; a held row is put back before anything else moves it)
        condition = ("#state = :expected_state AND #version = :expected_version AND #attempt = :expected_attempt"
                     " AND attribute_not_exists(held_by)")
        if row.lapsed_by is not None:
            names["#lease"] = "lease_expires_at"
            values[":reaped_at"] = {"N": str(row.lapsed_by)}
            condition += " AND #lease <= :reaped_at"
        return {"Update": {
            "TableName": self.jobs_table,
            "Key": wire_key(job_key(row.job_id)),
            "UpdateExpression": " ".join(clauses),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }}

    def waiting_update(self, update: WaitingUpdate) -> dict[str, Any]:
        """One job entering or leaving a queue entry (queue_entry_update)."""
        (entry,) = queue_entry_updates([update])
        return self.queue_entry_update(entry)

    def queue_entry_update(self, update: QueueEntryUpdate, running: RunningUpdate | None = None) -> dict[str, Any]:
        """The queue entry's band counts and total; jobs entering put the entry in the `active` index (its
        key kept if it has one), a claim re-keys it. With `running`: the change of the RUNNING counter kept
        on the same entry, under its cap."""
        names = {"#entity": "entity", "#tenant": "tenant_id", "#shard": "shard", "#waiting": "waiting"}
        values: dict[str, Any] = {":entity": {"S": Entity.TENANT_QUEUE.value}, ":tenant": {"S": update.tenant_id},
                                  ":shard": {"N": str(update.shard)}, ":delta": {"N": str(update.delta)}}
        sets = ["#entity = :entity", "#tenant = :tenant", "#shard = :shard"]
        if update.active_vt is not None:
            names["#avt"] = "active_vt"
            values[":vt"] = to_attribute(update.active_vt)
            if update.entering:
                names["#apk"] = "active_pk"
                values[":apk"] = {"S": active_partition(update.tenant_id, update.shard, self.active_shards,
                                                        update.entering_job)}
                sets += ["#apk = if_not_exists(#apk, :apk)", "#avt = if_not_exists(#avt, :vt)"]
            else:
                sets.append("#avt = :vt")
        if update.served:  # its tenant stayed backlogged (QueueEntry.returned_at)
            names["#returned"] = "returned_vt"
            values[":served"] = {"N": str(SERVED_SINCE_RETURN)}
            sets.append("#returned = :served")
        elif update.entering and update.active_vt is not None:
            # the clock as the entry enters the index; kept while it stays there (removed as it leaves)
            names["#returned"] = "returned_vt"
            sets.append("#returned = if_not_exists(#returned, :vt)")
        adds = []
        for number, (priority, delta) in enumerate(update.bands):
            names[f"#band{number}"] = band_attribute(priority)
            values[f":band{number}"] = {"N": str(delta)}
            adds.append(f"#band{number} :band{number}")
        adds.append("#waiting :delta")
        if running is not None:
            adds.append(usage_adds(running.usage, names, values))
        removes = ""
        if update.entering:  # jobs entering: counted, and the entry is no longer parked
            names |= {"#entered": "entered", "#ppk": "parked_pk", "#until": "parked_until"}
            values[":entering"] = {"N": str(update.entering)}
            adds.append("#entered :entering")
            removes = " REMOVE #ppk, #until"
        return {"Update": with_claim({
            "TableName": self.jobs_table,
            "Key": wire_key(queue_key(update.tenant_id, update.shard)),
            "UpdateExpression": f"SET {', '.join(sets)} ADD {', '.join(adds)}{removes}",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }, running)}

    def running_update(self, update: RunningUpdate) -> dict[str, Any]:
        """A RUNNING counter's change on its own: on the queue entry that keeps it, or, for an attempt claimed
        onto an older RUNNING item, on that item."""
        names = {"#entity": "entity", "#tenant": "tenant_id", "#shard": "shard"}
        entity, key = ((Entity.TENANT_RUNNING, running_key(update.tenant_id, update.shard)) if update.old_counter
                       else (Entity.TENANT_QUEUE, queue_key(update.tenant_id, update.shard)))
        values: dict[str, Any] = {":entity": {"S": entity.value}, ":tenant": {"S": update.tenant_id},
                                  ":shard": {"N": str(update.shard)}}
        adds = usage_adds(update.usage, names, values)
        return {"Update": with_claim({
            "TableName": self.jobs_table,
            "Key": wire_key(key),
            "UpdateExpression": f"SET #entity = :entity, #tenant = :tenant, #shard = :shard ADD {adds}",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }, update)}

    def still_at_cap(self, tenant_id: str, shard: int, count: int) -> dict[str, Any]:
        """A flexing claim's check that another tenant's RUNNING counter (on its queue entry) still counts at
        least `count` (above 0): its share of the cap, less what its older RUNNING item counts."""
        return {"ConditionCheck": {
            "TableName": self.jobs_table,
            "Key": wire_key(queue_key(tenant_id, shard)),
            "ConditionExpression": "#running >= :cap",
            "ExpressionAttributeNames": {"#running": "running"},
            "ExpressionAttributeValues": {":cap": {"N": str(count)}},
        }}

    def run_close(self, close: RunClose) -> dict[str, Any]:
        """The run record's close: an Update, so that what a record holds already (a partial one's progress or
        overlap marks, or a whole one a release before issue 34's change opened at its claim) is kept; refused
        once the record has an outcome (a second close). A close of a record opened the old way sets only
        its closure, on the condition that the record exists, as before."""
        fields = close.fields
        condition = "attribute_not_exists(#outcome)" if close.whole else \
            "attribute_exists(pk) AND attribute_not_exists(#outcome)"
        return {"Update": {
            "TableName": self.jobs_table,
            "Key": wire_key(run_key(close.job_id, close.attempt)),
            "UpdateExpression": "SET " + ", ".join(f"#{name} = :{name}" for name in fields),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {f"#{name}": name for name in fields},
            "ExpressionAttributeValues": {f":{name}": to_attribute(value) for name, value in fields.items()},
        }}


def overlap_clauses(mark: OverlapMark, names: dict[str, str], values: dict[str, Any]) -> tuple[list[str], str]:
    """A run's overlap mark as the SET terms and the ADD term of an update expression (names and values put
    into `names`, `values`): the attempts added to the number set `overlapped_with`, the `overlaps` index
    keys set unless the run has them (the first overlap found keys it)."""
    names |= {"#ow": "overlapped_with", "#opk": "overlap_pk", "#oat": "overlap_at"}
    values |= {":ow": {"NS": [str(attempt) for attempt in sorted(set(mark.attempts))]},
               ":opk": {"S": overlap_partition(mark.began_at)}, ":oat": {"N": str(mark.began_at)}}
    return ["#opk = if_not_exists(#opk, :opk)", "#oat = if_not_exists(#oat, :oat)"], "#ow :ow"


def on_entry(running: RunningUpdate, entry: QueueEntryUpdate) -> bool:
    """True when the RUNNING counter `running` changes is kept on the queue entry `entry` updates."""
    return not running.old_counter and (running.tenant_id, running.shard) == (entry.tenant_id, entry.shard)


def with_claim(update: dict[str, Any], running: RunningUpdate | None) -> dict[str, Any]:
    """An Update of a RUNNING counter (`update`: "SET ..." first) with what its claim adds, if anything: running
    below `below_cap` (an item with no counter yet counting 0), and the returning tenant's lift set, only over
    a lower one (the item returned when refused tells a lift met from a cap: Transaction.refused)."""
    if running is None or (running.below_cap is None and running.lift_vt is None):
        return update
    names, values, conditions = dict(update["ExpressionAttributeNames"]), dict(update["ExpressionAttributeValues"]), []
    expression = update["UpdateExpression"]
    if running.below_cap is not None:
        names["#running"] = "running"
        values[":cap"] = {"N": str(running.below_cap)}
        conditions.append("(attribute_not_exists(#running) OR #running < :cap)" if running.below_cap > 0
                          else "#running < :cap")
    if running.lift_vt is not None:
        names["#lift"] = LIFT_ATTRIBUTE
        values[":lift"] = {"N": str(running.lift_vt)}
        conditions.append("(attribute_not_exists(#lift) OR #lift < :lift)")
        expression = "SET #lift = :lift, " + expression.removeprefix("SET ")
    return {**update, "UpdateExpression": expression, "ConditionExpression": " AND ".join(conditions),
            "ExpressionAttributeNames": names, "ExpressionAttributeValues": values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}


def lift_refused(reason: Mapping[str, Any], running: RunningUpdate | None) -> bool:
    """Whether a cancellation reason is a claim's lift met by one as high (another claim served the returning
    tenant meanwhile), judged on the counter's item it returned."""
    item = reason.get("Item")
    if running is None or running.lift_vt is None or reason.get("Code") != "ConditionalCheckFailed" or not item:
        return False
    held = item.get(LIFT_ATTRIBUTE)
    return held is not None and float(held["N"]) >= running.lift_vt


def usage_adds(change: UsageChange, names: dict[str, str], values: dict[str, Any]) -> str:
    """`change` as the ADD clause of an update expression (names and values put into `names`, `values`);
    `running` is always named (conditions use it), zero terms are left out."""
    names["#running"] = "running"
    clauses = []
    for attribute, amount in (("running", change.running), ("ended_ms", change.ended_ms),
                              ("started_ms_sum", change.started_ms_sum), ("ended", change.ended)):
        if amount:
            names[f"#{attribute}"] = attribute
            values[f":{attribute}"] = {"N": str(amount)}
            clauses.append(f"#{attribute} :{attribute}")
    return ", ".join(clauses)
