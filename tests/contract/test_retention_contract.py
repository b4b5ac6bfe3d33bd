"""The retention policy on both store backends (tests/contract/backends.py): a finished job's row and run
records (the completing one holds the result) carry the TTL of the policy's rule for its tenant, type and
outcome; a run record of an attempt that ended while the job went on keeps the longest of the job's
outcomes'; the Idempotency-Key keeps JobRetentionDays. The memory backend renders what it holds as DynamoDB
items with the same rules."""

from __future__ import annotations

from onward.domain.models import ErrorSummary, NewJob
from onward.domain.retention import DAY_S, RetentionPolicy

POLICY = RetentionPolicy.from_document(
    '{"default": {"succeeded": 2, "cancelled": 1, "dead": 9, "quarantined": 9},'
    ' "types": {"demo.report": {"succeeded": 5}}}', 30 * DAY_S)


def _expiries(backend, job_id: str) -> dict[str, int | None]:
    return {item["sk"]: item.get("expires_at") for item in backend.jobs_table() if item["pk"] == f"JOB#{job_id}"}


def test_a_finished_jobs_items_keep_the_policys_retention_for_its_outcome(backend, clock):
    """Without the policy threaded into the transition's write, every item would keep JobRetentionDays (30 d);
    without the longest-outcome rule the retried attempt's record would take the job's current (non-final)
    state's retention, or go before the job's row if it ended dead."""
    store = backend.store(retention_policy=POLICY)
    plain = store.create("acme", NewJob(type="demo.echo", max_attempts=2), idempotency_key="k-1").job
    clock.advance(1)
    first = store.claim("w1", 30)
    assert first is not None and first.job_id == plain.job_id
    clock.advance(1)
    store.fail(first, ErrorSummary.of("Flaky", "once"))
    failed_at = clock.now
    clock.advance(2)
    ended = {}
    second = store.claim("w1", 30)
    assert second is not None and second.job_id == plain.job_id
    clock.advance(1)
    ended[plain.job_id] = store.complete(second, {"ok": 1}).job
    report = store.create("acme", NewJob(type="demo.report")).job
    clock.advance(1)
    lease = store.claim("w2", 30)
    assert lease is not None and lease.job_id == report.job_id
    clock.advance(1)
    ended[report.job_id] = store.complete(lease, {"ok": 1}).job

    plain_end = ended[plain.job_id].updated_at // 1000
    assert _expiries(backend, plain.job_id) == {
        "JOB": plain_end + 2 * DAY_S,
        "RUN#000001": failed_at // 1000 + 9 * DAY_S,  # ended while the job went on: the longest outcome's
        "RUN#000002": plain_end + 2 * DAY_S}  # (with the result: kept as the row is)
    report_end = ended[report.job_id].updated_at // 1000
    assert _expiries(backend, report.job_id) == {
        "JOB": report_end + 5 * DAY_S, "RUN#000001": report_end + 5 * DAY_S}
    (key,) = [item for item in backend.jobs_table() if item["pk"].startswith("IDEM#")]
    assert key["expires_at"] == plain.created_at // 1000 + 30 * DAY_S, "the key's window stays JobRetentionDays"
