"""The partitions of held entries (onward.store.held_partitions, onward.store.ports.index_shards.HELD_SHARDS) and
the reads that merge them (onward.store.held_jobs.first_held, every_held), pure: a paused type's entries spread
by job id over shards that take the platform's rate, a concurrency key's in one partition, the unsharded key of
entries held before the shards read too, and a sweep over the shards in held order."""

from __future__ import annotations

import zlib
from collections import Counter

from onward.store.held_jobs import HeldJob, Holding, Released, every_held, first_held
from onward.store.held_partitions import entry_partition, entry_partitions, partitions, sharded
from onward.store.ports.index_shards import HELD_SHARDS, held_shard

PARTITION_WRITE_UNITS = 1_000  # DynamoDB's per partition and second
HOLD_WRITE_UNITS = 2  # a held entry's put in the hold's transaction (under 1 KB)
PLATFORM_JOBS_PER_S = 10_000


def test_the_shards_take_a_paused_type_at_the_platforms_rate() -> None:
    """Catches a shard count lowered below what 10,000 holds a second of one type need (each partition takes
    500), or one hold key left in one partition (about 500 jobs/s, then every hold of it throttled)."""
    assert HELD_SHARDS * PARTITION_WRITE_UNITS / HOLD_WRITE_UNITS >= PLATFORM_JOBS_PER_S
    assert len({entry_partition("paused#demo.mail", f"{n:032x}") for n in range(1_000)}) == HELD_SHARDS


def test_a_paused_types_entry_has_a_stable_shard_drawn_from_the_job_id() -> None:
    """Catches a shard that is not a function of the job id alone (a release, or a cancel's put back, would
    delete the entry where it is not, and a resume would find it stranded), or one drawn from a process-seeded
    hash (another process would look elsewhere)."""
    job_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    expected = zlib.crc32(job_id.encode()) % HELD_SHARDS
    assert held_shard(job_id) == expected
    assert entry_partition("paused#demo.mail", job_id) == f"paused#demo.mail#{expected}"
    assert entry_partitions("paused#demo.mail", job_id) == [f"paused#demo.mail#{expected}", "paused#demo.mail"]


def test_ten_thousand_ids_spread_evenly_over_the_shards() -> None:
    """Catches a hash that favours some shards (the hottest would throttle below the arithmetic's rate)."""
    counts = Counter(held_shard(f"{n:032x}") for n in range(10_000))
    assert max(counts.values()) < 1.15 * 10_000 / HELD_SHARDS


def test_every_partition_of_a_pause_is_read_and_its_unsharded_key_last() -> None:
    """Catches a reader that leaves out a shard, or the key entries were held under before the shards (a stack
    upgraded with jobs held: they would never be released)."""
    read = partitions("paused#demo.mail")
    assert read[:-1] == [f"paused#demo.mail#{shard}" for shard in range(HELD_SHARDS)]
    assert read[-1] == "paused#demo.mail"


def test_a_concurrency_keys_holds_stay_in_one_partition() -> None:
    """Catches a concurrency key's holds sharded: the end of an attempt reads its key's oldest held job in one
    Query, and would then need one per shard."""
    assert not sharded("concurrency#customer-42") and sharded("paused#demo.mail")
    assert entry_partition("concurrency#customer-42", "4bf92f35") == "concurrency#customer-42"
    assert partitions("concurrency#a#b") == ["concurrency#a#b"] == entry_partitions("concurrency#a#b", "4bf92f35")


class Partitions:
    """Held entries by partition, read as a HeldJobs.held_in reads them (sorted, first `limit`), counting reads."""

    def __init__(self, jobs: list[HeldJob]) -> None:
        self.kept: dict[str, dict[str, HeldJob]] = {}
        for job in jobs:
            self.kept.setdefault(job.partition, {})[job.job_id] = job
        self.reads = 0

    def held_in(self, partition: str, tenant_id: str | None, limit: int) -> list[HeldJob]:
        self.reads += 1
        jobs = [job for job in self.kept.get(partition, {}).values() if tenant_id in (None, job.tenant_id)]
        return sorted(jobs, key=lambda job: (job.tenant_id, job.due_at, job.job_id))[:limit]

    def release(self, job: HeldJob) -> None:
        del self.kept[job.partition][job.job_id]


def _held(count: int, tenants: int) -> list[HeldJob]:
    jobs = []
    for n in range(count):
        job_id = f"{n:032x}"
        jobs.append(HeldJob(job_id, f"t{n % tenants}", 1_000 + n, entry_partition("paused#demo.mail", job_id)))
    return jobs


def test_a_sweep_over_the_shards_gives_every_entry_once_in_tenant_then_due_order() -> None:
    """Catches a merge that gives the shards one after another (a tenant's later jobs back before its earlier
    ones, so a claim during the sweep starts them first), one that misses an entry past a shard's first page,
    or reads a shard for every entry rather than a page at a time."""
    jobs = _held(500, tenants=7)
    legacy = HeldJob("f" * 32, "t3", 999, "paused#demo.mail")  # held before the shards: first of t3
    book = Partitions([*jobs, legacy])
    given = []
    for job in every_held(book.held_in, "paused#demo.mail", None, page=10):
        given.append(job)
        book.release(job)
    assert given == sorted([*jobs, legacy], key=lambda job: (job.tenant_id, job.due_at))
    assert book.reads <= len(partitions("paused#demo.mail")) * 2 + len(given) / 10 + HELD_SHARDS


def test_a_sweep_of_one_tenant_gives_only_its_entries_and_gives_again_one_not_released() -> None:
    """Catches a tenant's sweep that gives another tenant's entries (their pause may be in force), or one that
    forgets an entry whose release failed in a full page (a TransactionConflict: it is tried again, as a page
    read again gave it before the shards)."""
    jobs = _held(60, tenants=3)
    book = Partitions(jobs)
    given = []
    failed_once: set[str] = set()
    for job in every_held(book.held_in, "paused#demo.mail", "t1", page=1):  # (every page full: read again)
        given.append(job.job_id)
        if job.job_id in failed_once or len(failed_once) == 1:
            book.release(job)
        else:
            failed_once.add(job.job_id)  # (left held: given again once its shard's page is read again)
    mine = [job.job_id for job in jobs if job.tenant_id == "t1"]
    assert sorted(set(given)) == sorted(mine)
    assert given.count(next(iter(failed_once))) == 2


def test_the_first_held_of_a_key_are_the_first_over_all_its_partitions() -> None:
    """Catches a read of the first held jobs (an end's oldest held, a cancel_oldest_queued) that looks in one
    shard only."""
    jobs = _held(100, tenants=2)
    book = Partitions(jobs)
    assert first_held(book.held_in, "paused#demo.mail", "t1", 4) == [job for job in jobs if job.tenant_id == "t1"][:4]


class LosingBook(Partitions):
    """A HeldJobs whose release of one job loses a race (its entry stays) and of a stray one drops it."""

    def __init__(self, jobs: list[HeldJob], loses: str, stray: str) -> None:
        super().__init__(jobs)
        self.loses, self.stray = loses, stray

    def release(self, job_id: str, hold_key: str, clock: float, entry: HeldJob | None = None) -> bool:  # type: ignore[override]
        assert entry is not None
        if job_id == self.loses:
            return False
        super().release(entry)
        return job_id != self.stray


def test_a_sweep_whose_release_lost_a_race_says_more_and_one_of_strays_says_done() -> None:
    """Catches a sweep that answers done while a job it failed to release is still held: the resume's mark is
    then cleared and the job stays held until the type is paused and resumed again (a release that lost a
    transaction conflict in a partition whose last page was not full is not given again). A stray entry (its row
    not held under the key) is dropped by its release, so a sweep that met only those is done."""
    jobs = _held(5, tenants=1)
    losing = LosingBook(jobs, loses=jobs[2].job_id, stray=jobs[4].job_id)
    result = Holding(losing, lambda: 0.0, lambda: 0).release_all("paused#demo.mail")
    assert result == Released(3, more=True)
    stray_only = LosingBook(_held(5, tenants=1), loses="", stray=jobs[4].job_id)
    assert Holding(stray_only, lambda: 0.0, lambda: 0).release_all("paused#demo.mail") == Released(4, more=False)
