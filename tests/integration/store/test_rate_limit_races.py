"""Rate limits under real threads on DynamoDB (the embedded endpoint, the real clock; issue 37): 8 threads in 4
stores (as 4 processes, each with its own limit cache and claim path) claim 60 jobs of one key limited to
10 per second. Every start's window holds at most what GCRA allows (limit + floor((w + grace) / T)), no
start comes before its token (the burst, then one per interval), and every job started once.

Without the compare-and-set on the bucket's TAT, two threads that read one TAT would both take the token
after it (a burst over the limit); without the job row's condition on `rate_reserved_at` a job could be
reserved twice and its second token wasted (the run would be slower than the rate)."""

from __future__ import annotations

import threading
import time

import pytest

from onward.domain.models import NewJob
from onward.domain.rate_limits import Gcra, grace_ms, max_starts
from onward.domain.states import JobState
from onward.store.service import JobStore

pytestmark = pytest.mark.integration

LIMIT, PERIOD_S, JOBS, STORES, THREADS_PER_STORE = 10, 1.0, 60, 4, 2


def test_threads_racing_claims_never_pass_a_rate_limit(settings, dynamodb) -> None:
    stores = [JobStore(settings, client=dynamodb) for _ in range(STORES)]
    stores[0].rate_limits.put("acme", "api", LIMIT, PERIOD_S)
    job_ids = [answer.job.job_id for answer in stores[0].create_batch(
        "acme", [(NewJob(type="demo.echo", params={"n": n}, rate_limit_key="api"), None) for n in range(JOBS)])]
    starts: list[tuple[int, str]] = []
    lock = threading.Lock()
    done = threading.Event()

    def worker(store: JobStore, number: int) -> None:
        while not done.is_set():
            lease = store.claim(f"w{number}", 30)
            if lease is None:
                time.sleep(0.02)
                continue
            with lock:
                starts.append((lease.job.updated_at, lease.job_id))  # the claim's time: when the attempt started
                if len(starts) == JOBS:
                    done.set()
            store.complete(lease)

    threads = [threading.Thread(target=worker, args=(store, n * THREADS_PER_STORE + t))
               for n, store in enumerate(stores) for t in range(THREADS_PER_STORE)]
    for thread in threads:
        thread.start()
    finished = done.wait(timeout=60)
    done.set()
    for thread in threads:
        thread.join(timeout=30)
    assert finished, f"{len(starts)} of {JOBS} jobs started"
    assert sorted(job_id for _, job_id in starts) == sorted(job_ids)  # each once
    assert {stores[0].get(job_id).state for job_id in job_ids} == {JobState.SUCCEEDED}
    gcra = Gcra(LIMIT, PERIOD_S)
    moments = sorted(at for at, _ in starts)
    grace = grace_ms([gcra])
    for i, first in enumerate(moments):
        for j in range(i, len(moments)):
            assert j - i + 1 <= max_starts(gcra, moments[j] - first, grace), moments[i:j + 1]
    # by any start, no more than the tokens since the first: limit, then one per interval
    interval_ms = gcra.interval_us / 1000
    assert all(count <= LIMIT + (at - moments[0]) // interval_ms + 1 for count, at in enumerate(moments, 1))
