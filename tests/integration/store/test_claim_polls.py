"""What a worker's poll for work costs when nothing is due, and what it may miss for how long.

A process's idle workers poll one after another. A poll (JobStore.claim(polling=True)) that finds nothing in
what the process shares would read the whole head of the `active` index again (a Query per partition), so
the polls of idle workers, not jobs, would set every partition's read load (bench/scale.py's realistic run:
1.06 head reads per job, 0.27 with the sharing). Instead, nothing found on a claim's own reads answers the
process's polls for NOTHING_SHARE_MS, unless the process itself wrote a job into a queue meanwhile. A claim
that is not a poll (the default) still answers None only from reads of its own. Counted on both backends as
tests/integration/store/metering.py counts them.
"""

from __future__ import annotations

from onward.store.claims import NOTHING_SHARE_MS
from onward.store.ports.index_shards import DEFAULT_ACTIVE_SHARDS, PARKED_SHARDS
from tests.integration.store.test_requests_per_job import ECHO, LEASE_S


def head_reads(cost: dict[str, int], *, wakes: int = 0) -> float:
    """Reads of the `active` index's head in a claim's requests (a Query per partition), less the parked
    entries' reads of `wakes` passes (a Query per `parked` partition, once a second). No job is due here, so
    no ready queue is read."""
    return (cost.get("Query", 0) - wakes * PARKED_SHARDS) / DEFAULT_ACTIVE_SHARDS


def test_polls_of_an_idle_process_share_what_its_last_claim_found_nothing_in(metered, clock):
    """Without the sharing (Claimer._found_nothing_lately), each poll below reads the head again: head_reads
    would be 1 for every one of them."""
    store = metered.store
    nothing, first = metered.count(lambda: store.claim("w1", LEASE_S, polling=True))
    assert nothing is None and head_reads(first, wakes=1) == 1, "the first poll reads the head itself"
    for worker in ("w2", "w3", "w4"):  # (polls this close together use the head the process read)
        clock.now += NOTHING_SHARE_MS // 4
        answer, cost = metered.count(lambda worker=worker: store.claim(worker, LEASE_S, polling=True))
        assert answer is None and cost == {}, "a poll within NOTHING_SHARE_MS of it reads nothing"
    clock.now += NOTHING_SHARE_MS
    answer, cost = metered.count(lambda: store.claim("w1", LEASE_S, polling=True))
    assert answer is None and head_reads(cost) == 1, "past NOTHING_SHARE_MS a poll reads the head again"


def test_a_claim_that_is_not_a_poll_answers_nothing_only_from_its_own_reads(metered, clock):
    """What JobStore.claim promises its other callers (the model test's claims, an operator's): a None means
    nothing was due as its own reads showed. Without `polling` gating the sharing, the second claim would
    read nothing and miss the job another process created."""
    store, other_process = metered.store, metered.backend.store()
    assert store.claim("w1", LEASE_S, polling=True) is None
    job = other_process.create("acme", ECHO).job
    lease, cost = metered.count(lambda: store.claim("w2", LEASE_S))
    assert lease is not None and lease.job_id == job.job_id
    assert cost["Query"] == DEFAULT_ACTIVE_SHARDS + 1, "it read the head itself, then the job's ready queue"


def test_a_poll_misses_another_process_s_new_job_for_at_most_nothing_share_ms(metered, clock):
    """The price of the sharing, bounded: a job another process created just after this process found
    nothing waits for the first poll past NOTHING_SHARE_MS, however often the process polls meanwhile
    (without the bound it would wait until a claim that is not a poll came)."""
    store, other_process = metered.store, metered.backend.store()
    assert store.claim("w1", LEASE_S, polling=True) is None
    job = other_process.create("acme", ECHO).job
    step = NOTHING_SHARE_MS // 5
    for worker in ("w2", "w3", "w4", "w5"):
        clock.now += step
        assert store.claim(worker, LEASE_S, polling=True) is None, "within NOTHING_SHARE_MS: the shared answer"
    clock.now += NOTHING_SHARE_MS - 4 * step
    lease = store.claim("w6", LEASE_S, polling=True)
    assert lease is not None and lease.job_id == job.job_id


def test_a_job_the_process_itself_enqueues_ends_the_shared_answer_at_once(metered, clock):
    """A handler that enqueues a follow-up job, or an attempt that failed into a retry, writes through the
    process's own store: its polls must not answer nothing for what it just wrote. Without
    Claimer.jobs_entered the poll below answers None."""
    store = metered.store
    assert store.claim("w1", LEASE_S, polling=True) is None
    job = store.create("acme", ECHO).job
    lease = store.claim("w2", LEASE_S, polling=True)
    assert lease is not None and lease.job_id == job.job_id
