"""Creating jobs: one create or a batch of them, each with its optional Idempotency-Key, as few transactions
as DynamoDB's limits allow (onward.store.dynamo.transaction_limits); what JobStore.create and
JobStore.create_batch do."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import time
from collections.abc import Callable

from onward.domain import lifecycle
from onward.domain.clock import Clock
from onward.domain.documents import json_size
from onward.domain.errors import (
    IdempotencyConflict,
    InvalidRequest,
    OnwardError,
    PayloadTooLarge,
    StoreContention,
)
from onward.domain.models import Job, NewJob
from onward.domain.regions import first_version_of
from onward.store.answers import Created
from onward.store.dynamo.transaction_limits import transaction_cuts
from onward.store.ports.job_log import JobLog
from onward.store.ports.outcomes import CreateOutcome
from onward.store.ports.region_epochs import WriterEpoch
from onward.store.ports.tenant_values import Tenant
from onward.store.ports.write_plans import NewJobWrite
from onward.store.tenants import TenantRegistry, check_tenant_id
from onward.store.unique_keys import TryAgain, UniqueKeys, unique_claim

MAX_PARAMS_BYTES = 300_000  # the job row must stay under DynamoDB's 400 KB item limit
MAX_IDEMPOTENCY_KEY = 128
MAX_BATCH = 100  # entries of one create_batch
CREATE_ATTEMPTS = 8  # a create whose transaction meets a TransactionConflict (on a WAITING counter) retries


def check_new_job(request: NewJob, idempotency_key: str | None) -> None:
    """What a create refuses before writing anything: params too large, a malformed Idempotency-Key."""
    if json_size(request.params) > MAX_PARAMS_BYTES:
        raise PayloadTooLarge(
            f"params take {json_size(request.params)} bytes as JSON; the limit is {MAX_PARAMS_BYTES} "
            "(store large inputs elsewhere and pass a reference)"
        )
    if idempotency_key is not None and (
            not 1 <= len(idempotency_key) <= MAX_IDEMPOTENCY_KEY or not idempotency_key.isprintable()):
        raise InvalidRequest(f"an Idempotency-Key is 1 to {MAX_IDEMPOTENCY_KEY} printable characters")



def request_digest(request: NewJob) -> str:
    """The digest an Idempotency-Key remembers its request by. Fields left unset (None) are left out, so a
    field added later does not change the digest of a request that does not use it: a retry with a key
    used before the field existed still finds its job."""
    canonical = json.dumps(request.model_dump(mode="json", exclude_none=True), sort_keys=True,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()



class JobCreation:
    """The creates of one JobStore, over its job log. Thread-safe."""

    def __init__(self, log: JobLog, registry: TenantRegistry, clock: Clock, rng: random.Random, *,
                 get_job: Callable[[str], Job], new_job_id: Callable[[], str], retention_s: int,
                 job_retention_s: int, unique_keys: UniqueKeys) -> None:
        self._log = log
        self._registry = registry
        self._clock = clock
        self._rng = rng
        self._get_job = get_job  # the store's strongly consistent read (JobNotFound when there is none)
        self._new_job_id = new_job_id
        self._retention_s = retention_s
        self._job_retention_s = job_retention_s
        self._unique_keys = unique_keys  # unique jobs (issue 37)
        # the job's type's defaults (issue 37: its max_attempts; the store's JobTypes), after the digest
        self.type_defaults: Callable[[NewJob], NewJob] = lambda request: request
        self.writer_epoch = WriterEpoch()  # the store's (region fence, issue 39): a create starts at its versions

    def create(self, tenant_id: str, request: NewJob, idempotency_key: str | None = None) -> Created:
        """Enqueue a job. With an Idempotency-Key, a retry of the same request returns the same job and
        writes nothing; the same key with a different request raises IdempotencyConflict."""
        check_tenant_id(tenant_id)
        check_new_job(request, idempotency_key)
        # The key is not read first: the create's transaction writes the key's item only where none is, so
        # a new key costs one request, and only a key in use (KEY_USED: nothing was written) is read.
        write = self._new_job_write(self._registry.tenant(tenant_id), request, idempotency_key)
        change = write.change
        replaced = None
        for attempt in range(CREATE_ATTEMPTS):
            outcome = self._log.create(write)
            if outcome is CreateOutcome.CREATED:
                return Created(change.after, created=True, replaced=replaced)
            if outcome is CreateOutcome.UNIQUE_HELD:  # unique jobs (issue 37): nothing was written
                step = self._unique_step(tenant_id, request, write)
                if isinstance(step, Created):
                    return step
                write, replaced = dataclasses.replace(write, unique=step.taking), step.replaced or replaced
                continue
            if outcome is CreateOutcome.KEY_USED:
                assert idempotency_key is not None
                earlier = self._resolve_idempotency(tenant_id, idempotency_key, request)
                if earlier is not None:
                    return earlier
                # The key's item is gone since the write found it (its window ended, TTL): the key is free,
                # so the create is tried again as it is, as a create that found no key creates the job.
                continue
            # CONFLICT: nothing was written; tried again as it is (same job id, same items).
            time.sleep(self._rng.uniform(0, 0.002 * 2 ** attempt))
        raise StoreContention(f"a create for {tenant_id}: gave up after {CREATE_ATTEMPTS} conflicts")

    def _new_job_write(self, tenant: Tenant, request: NewJob, idempotency_key: str | None) -> NewJobWrite:
        now = self._clock()
        change = lifecycle.create(self._new_job_id(), tenant.tenant_id, self.type_defaults(request), now)
        epoch = self.writer_epoch.value
        if epoch:  # (region fence, issue 39)
            change = dataclasses.replace(change, after=change.after.model_copy(
                update={"version": first_version_of(epoch)}))
        return NewJobWrite.of(
            change, ready_shards=tenant.ready_shards, retention_s=self._retention_s,
            job_retention_s=self._job_retention_s, clock=self._registry.virtual_clock(),
            idempotency=None if idempotency_key is None else (idempotency_key, request_digest(request)),
            unique=unique_claim(change.after, request, now), region_epoch=epoch)

    def _unique_step(self, tenant_id: str, request: NewJob, write: NewJobWrite) -> Created | TryAgain:
        """What a create whose unique key was found held does next (onward.store.unique_keys)."""
        assert request.unique is not None and write.unique is not None
        return self._unique_keys.resolve(tenant_id, request.unique, write.unique)

    def create_batch(self, tenant_id: str, entries: list[tuple[NewJob, str | None]]
                     ) -> list[Created | OnwardError]:
        """Enqueue up to MAX_BATCH jobs of one tenant, each with its own optional Idempotency-Key: per entry,
        in order, what `create` alone would answer (its Created, or the OnwardError it would raise:
        InvalidRequest, PayloadTooLarge, IdempotencyConflict, StoreContention...). One entry's refusal never
        refuses another's. The batch itself is refused (InvalidRequest, nothing written) only for what is
        wrong with all of it: the tenant id, more than MAX_BATCH entries.

        The jobs are written in as few transactions as DynamoDB takes (transaction_cuts: 100
        actions, 4 MB), each job's counts summed per queue entry. A transaction refused because some entries'
        keys are in use wrote nothing: those entries are answered as `create` answers a key in use
        (_resolve_idempotency), and the others are written again without them; one that meets a concurrent
        transaction is tried again as it is, up to CREATE_ATTEMPTS times (then its entries are answered
        StoreContention: nothing of them was written). Entries repeating a key of an earlier entry of the
        batch are answered as `create` would after that entry: the same job (created False) for the same
        request, IdempotencyConflict for another. An error that is no refusal (throttling past the client's
        retries, the network) raises as `create`'s does: the jobs of transactions already committed stay
        created, and a retry with the same keys answers them created False."""
        check_tenant_id(tenant_id)
        if len(entries) > MAX_BATCH:
            raise InvalidRequest(f"a batch holds at most {MAX_BATCH} jobs, not {len(entries)}")
        answers: list[Created | OnwardError | None] = [None] * len(entries)
        pending: list[tuple[int, NewJobWrite]] = []
        first_with_key: dict[str, int] = {}
        repeats: list[int] = []
        unique_keys: set[str] = set()
        alone: list[int] = []  # entries whose unique key an earlier entry takes, or a transaction found held
        tenant: Tenant | None = None
        for index, (request, key) in enumerate(entries):
            try:
                check_new_job(request, key)
            except OnwardError as refusal:
                answers[index] = refusal
                continue
            if key is not None:
                if key in first_with_key:  # one transaction cannot put one key twice: answered after the first
                    repeats.append(index)
                    continue
                first_with_key[key] = index
            if request.unique is not None:  # unique jobs (issue 37): a key repeated in the batch is created alone
                if request.unique.key in unique_keys:
                    alone.append(index)
                    continue
                unique_keys.add(request.unique.key)
            tenant = tenant or self._registry.tenant(tenant_id)
            pending.append((index, self._new_job_write(tenant, request, key)))
        for cut in transaction_cuts([write for _, write in pending]):
            self._create_together(tenant_id, entries, [pending[position] for position in cut], answers, alone)
        for index in sorted(alone):  # after the batch's transactions, in order, each as `create` alone
            try:
                answers[index] = self.create(tenant_id, *entries[index])
            except OnwardError as refusal:
                answers[index] = refusal
        for index in repeats:
            request, key = entries[index]
            assert key is not None
            answers[index] = self._repeated_key(tenant_id, key, request, entries[first_with_key[key]][0],
                                                answers[first_with_key[key]])
        assert all(answer is not None for answer in answers)
        return [answer for answer in answers if answer is not None]

    def _create_together(self, tenant_id: str, entries: list[tuple[NewJob, str | None]],
                         chunk: list[tuple[int, NewJobWrite]], answers: list[Created | OnwardError | None],
                         alone: list[int]) -> None:
        """Write `chunk` (entries that fit one transaction) and put each entry's answer in `answers`; an entry
        whose unique key is held goes to `alone` (created afterwards as `create` would)."""
        conflicts = 0
        while chunk:
            outcome = self._log.create_many([write for _, write in chunk])
            if outcome.outcome is CreateOutcome.CREATED:
                for index, write in chunk:
                    answers[index] = Created(write.change.after, created=True)
                return
            if outcome.outcome is CreateOutcome.KEY_USED:
                still = [(index, write) for position, (index, write) in enumerate(chunk)
                         if position not in outcome.keys_used or not self._answer_key_used(
                             tenant_id, entries[index], answers, index)]
                if len(still) < len(chunk):
                    chunk = still
                    continue
                # every key found in use was gone when read (its window ended): tried again, as a conflict
            if outcome.outcome is CreateOutcome.UNIQUE_HELD:  # unique jobs (issue 37): nothing was written
                alone.extend(chunk[position][0] for position in outcome.unique_held)
                chunk = [entry for position, entry in enumerate(chunk) if position not in outcome.unique_held]
                continue
            conflicts += 1  # CONFLICT: nothing was written; tried again as it is (same job ids, same items)
            if conflicts == CREATE_ATTEMPTS:
                for index, _ in chunk:
                    answers[index] = StoreContention(
                        f"a create for {tenant_id}: gave up after {CREATE_ATTEMPTS} conflicts")
                return
            time.sleep(self._rng.uniform(0, 0.002 * 2 ** conflicts))

    def _answer_key_used(self, tenant_id: str, entry: tuple[NewJob, str | None],
                         answers: list[Created | OnwardError | None], index: int) -> bool:
        """Answer an entry whose Idempotency-Key a transaction found in use, as `create` does: True when
        answered, False when the key is free again (its item gone since: the entry is written as it is)."""
        request, key = entry
        assert key is not None
        try:
            earlier = self._resolve_idempotency(tenant_id, key, request)
        except OnwardError as refusal:
            answers[index] = refusal
            return True
        if earlier is None:
            return False
        answers[index] = earlier
        return True

    def _repeated_key(self, tenant_id: str, key: str, request: NewJob, first_request: NewJob,
                      first: Created | OnwardError | None) -> Created | OnwardError:
        """The answer to an entry whose Idempotency-Key an earlier entry of its batch used (answered `first`):
        what `create` answers after that entry."""
        if isinstance(first, Created):
            if request_digest(request) == request_digest(first_request):
                return Created(first.job, created=False)
            return IdempotencyConflict(key, first.job.job_id)
        try:  # the first found the key in use, or was not written: the key says
            earlier = self._resolve_idempotency(tenant_id, key, request)
        except OnwardError as refusal:
            return refusal
        if earlier is not None:
            return earlier
        assert first is not None
        return first  # nothing holds the key: the first's refusal (contention) is this one's too

    def _resolve_idempotency(self, tenant_id: str, key: str, request: NewJob) -> Created | None:
        """What a create whose Idempotency-Key is in use answers: the job it made (same request), or
        IdempotencyConflict (another request). None when the key is not in use (any more)."""
        earlier = self._log.idempotency(tenant_id, key)
        if earlier is None:
            return None
        if earlier.digest != request_digest(request):
            raise IdempotencyConflict(key, earlier.job_id)
        return Created(self._get_job(earlier.job_id), created=False)
