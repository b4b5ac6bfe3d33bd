"""KinesisPublisher (onward/pipeline/relay/publisher.py) against a fake Kinesis client: no network, scripted per-entry
ErrorCodes, every PutRecords call recorded. What each limit and rule protects:

- batches of at most 500 records / 5 MiB: Kinesis refuses the whole request beyond either;
- only the failed entries are retried: resending accepted ones would duplicate them in the stream;
- backoff from the injected `sleep`, growing and capped: without it a throttled shard is hammered;
- one event per job per call, a job's next event only after its previous one was accepted: otherwise a
  retried v2 could land behind v3 of the same job (Kinesis orders by arrival);
- a hopeless entry stops the publish: nothing after it goes out, so the relay's checkpoint and the
  event source can resume exactly at the first unpublished record.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onward.domain.backoff import BackoffPolicy
from onward.domain.models import OutboxEvent
from onward.domain.states import JobState
from onward.pipeline.relay.publisher import (
    MAX_BYTES_PER_REQUEST,
    MAX_RECORDS_PER_REQUEST,
    KinesisPublisher,
    RecordTooLarge,
    encode,
)

THROTTLED = "ProvisionedThroughputExceededException"
INTERNAL = "InternalFailure"
STATUSES = [JobState.QUEUED, JobState.RUNNING, JobState.SUCCEEDED, JobState.QUEUED, JobState.RUNNING]


def job_id(n: int) -> str:
    return f"{n:032x}"


def event(job: int, version: int, *, result: Any = None) -> OutboxEvent:
    jid = job_id(job)
    return OutboxEvent(
        event_id=f"{jid}:{version}", job_id=jid, tenant_id="acme", type="demo.echo", version=version,
        status=STATUSES[(version - 1) % len(STATUSES)], attempt=version // 2,
        occurred_at=f"2026-11-30T07:00:{version:02d}.000Z", result_inline=result,
    )


@dataclass
class Call:
    event_ids: list[str]
    partition_keys: list[str]
    sizes: list[int]  # data + partition key, the bytes Kinesis counts against 5 MiB
    codes: list[str | None]  # what the fake answered for each entry


@dataclass
class FakeKinesis:
    """Records every put_records call; answers each entry with the next scripted ErrorCode for that event
    (`failures[event_id]` is consumed one code per send; an exhausted or missing script means success).
    `always` makes an event fail with that code on every send."""

    failures: dict[str, list[str]] = field(default_factory=dict)
    always: dict[str, str] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    stream_names: set[str] = field(default_factory=set)

    def put_records(self, *, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803 - boto3 names
        self.stream_names.add(StreamName)
        event_ids = [json.loads(r["Data"])["event_id"] for r in Records]
        codes: list[str | None] = []
        for event_id in event_ids:
            script = self.failures.get(event_id)
            codes.append(self.always.get(event_id) or (script.pop(0) if script else None))
        self.calls.append(Call(event_ids, [r["PartitionKey"] for r in Records],
                               [len(r["Data"]) + len(r["PartitionKey"].encode()) for r in Records], codes))
        entries = [{"ErrorCode": c, "ErrorMessage": "scripted"} if c else
                   {"SequenceNumber": str(len(self.calls) * 1000 + i), "ShardId": "shardId-000000000000"}
                   for i, c in enumerate(codes)]
        return {"FailedRecordCount": sum(c is not None for c in codes), "Records": entries}

    def sent(self) -> list[str]:
        return [event_id for call in self.calls for event_id in call.event_ids]

    def accepted(self) -> list[tuple[int, str]]:
        """(call index, event id) of every accepted entry, in call order."""
        return [(n, event_id) for n, call in enumerate(self.calls)
                for event_id, code in zip(call.event_ids, call.codes, strict=True) if code is None]


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


class TopOfRange(random.Random):
    """An rng whose jitter always picks the top of the range, so each delay equals its ceiling."""

    def uniform(self, a: float, b: float) -> float:
        return b


def publisher(fake: FakeKinesis, sleeps: Sleeps | None = None, **options: Any) -> KinesisPublisher:
    return KinesisPublisher(fake, "events", sleep=sleeps if sleeps is not None else Sleeps(),
                            rng=random.Random(1), **options)


def assert_job_order_kept(events: Sequence[OutboxEvent], fake: FakeKinesis) -> None:
    """No call carries two events of one job; a job's event is sent only after the job's previous event
    (in `events` order) was accepted in an EARLIER call; nothing is sent again once accepted."""
    previous: dict[str, str] = {}
    position = {e.event_id: n for n, e in enumerate(events)}
    for e in events:
        previous[e.event_id] = next((p.event_id for p in reversed(events[:position[e.event_id]])
                                     if p.job_id == e.job_id), "")
    accepted_in: dict[str, int] = {}
    for n, call in enumerate(fake.calls):
        jobs = [event_id.split(":")[0] for event_id in call.event_ids]
        assert len(jobs) == len(set(jobs)), f"call {n} holds two events of one job: {call.event_ids}"
        for event_id in call.event_ids:
            assert event_id not in accepted_in, f"{event_id} sent again after it was accepted"
            before = previous[event_id]
            assert not before or accepted_in.get(before, n) < n, (
                f"{event_id} sent in call {n} before {before} was accepted")
        for event_id, code in zip(call.event_ids, call.codes, strict=True):
            if code is None:
                accepted_in[event_id] = n


# --- batch limits ---------------------------------------------------------------------------------------

def test_batches_never_exceed_500_records():
    events = [event(job, 1) for job in range(1_234)]
    fake = FakeKinesis()
    out = publisher(fake)

    assert out.publish(events) == [True] * 1_234
    assert [len(call.event_ids) for call in fake.calls] == [500, 500, 234]
    assert max(len(call.event_ids) for call in fake.calls) <= MAX_RECORDS_PER_REQUEST
    assert fake.sent() == [e.event_id for e in events]  # in stream order, each once
    assert (out.stats.requests, out.stats.records, out.stats.retried_entries) == (3, 1_234, 0)


def test_batches_never_exceed_5_mib():
    """30 events of ~600 KB: 15+ MiB, so at most 8 fit a request; a request of 9 would be refused."""
    events = [event(job, 1, result="x" * 600_000) for job in range(30)]
    fake = FakeKinesis()

    assert publisher(fake).publish(events) == [True] * 30
    assert all(sum(call.sizes) <= MAX_BYTES_PER_REQUEST for call in fake.calls)
    assert len(fake.calls) == 4 and all(len(call.event_ids) <= 8 for call in fake.calls)
    assert fake.sent() == [e.event_id for e in events]


def test_a_record_over_1_mib_is_refused_before_anything_is_sent():
    fake = FakeKinesis()
    with pytest.raises(RecordTooLarge):
        publisher(fake).publish([event(1, 1), event(2, 1, result="x" * (1024 * 1024))])
    assert fake.calls == []


def test_records_are_the_public_json_keyed_by_job_id():
    e = event(7, 3)
    fake = FakeKinesis()
    publisher(fake).publish([e])
    (call,) = fake.calls
    assert call.partition_keys == [e.job_id]
    assert fake.stream_names == {"events"}
    payload = json.loads(encode(e))
    assert payload["event_id"] == e.event_id and payload["schema"] == 1 and payload["version"] == 3


# --- retries --------------------------------------------------------------------------------------------

def test_only_the_failed_entries_are_retried():
    events = [event(job, 1) for job in range(10)]
    ids = [e.event_id for e in events]
    fake = FakeKinesis(failures={ids[2]: [THROTTLED], ids[4]: [INTERNAL], ids[7]: [THROTTLED]})
    sleeps = Sleeps()
    out = publisher(fake, sleeps)

    assert out.publish(events) == [True] * 10
    assert [call.event_ids for call in fake.calls] == [ids, [ids[2], ids[4], ids[7]]]
    assert sorted(fake.sent()) == sorted([*ids, ids[2], ids[4], ids[7]])  # the 7 accepted: sent once
    assert len(sleeps) == 1
    assert out.stats.requests == 2 and out.stats.retried_entries == 3 and out.stats.records == 10
    assert out.stats.error_codes == {THROTTLED: 2, INTERNAL: 1} and out.stats.failed_entries == 0


def test_backoff_delays_grow_and_are_capped():
    fake = FakeKinesis(failures={event(1, 1).event_id: [THROTTLED] * 6})
    sleeps = Sleeps()
    out = KinesisPublisher(fake, "events", backoff=BackoffPolicy(base_s=0.1, cap_s=0.5), max_retries=8,
                           sleep=sleeps, rng=TopOfRange())

    assert out.publish([event(1, 1)]) == [True]
    assert sleeps == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5, 0.5])  # doubling, then held at the cap
    assert out.stats.requests == 7 and out.stats.retried_entries == 6


def test_jittered_backoff_stays_within_its_bounds():
    fake = FakeKinesis(failures={event(1, 1).event_id: [INTERNAL] * 8})
    sleeps = Sleeps()
    policy = BackoffPolicy(base_s=0.05, cap_s=0.4)
    out = KinesisPublisher(fake, "events", backoff=policy, max_retries=8, sleep=sleeps, rng=random.Random(3))

    assert out.publish([event(1, 1)]) == [True]
    assert len(sleeps) == 8
    for attempt, delay in enumerate(sleeps, start=1):
        assert policy.ceiling(attempt) / 2 <= delay <= policy.ceiling(attempt) <= 0.4
    assert sleeps[-1] > sleeps[0] * 3  # grew, by far more than jitter could explain


def test_a_non_retriable_code_stops_at_once():
    events = [event(1, 1), event(2, 1), event(1, 2), event(2, 2), event(3, 1)]
    fake = FakeKinesis(failures={events[1].event_id: ["KMSAccessDeniedException"]})
    sleeps = Sleeps()
    out = publisher(fake, sleeps)

    assert out.publish(events) == [True, False, False, False, True]
    assert len(fake.calls) == 1 and sleeps == []  # not retried, and nothing sent after it
    assert out.stats.failed_entries == 1 and out.stats.retried_entries == 0
    assert out.stats.error_codes == {"KMSAccessDeniedException": 1}


# --- per-job order --------------------------------------------------------------------------------------

def test_two_events_of_one_job_never_share_a_call():
    a, b, c = 1, 2, 3
    events = [event(a, 1), event(a, 2), event(a, 3), event(b, 1), event(c, 1), event(c, 2)]
    fake = FakeKinesis()

    assert publisher(fake).publish(events) == [True] * 6
    assert [call.event_ids for call in fake.calls] == [
        [events[0].event_id, events[3].event_id, events[4].event_id],
        [events[1].event_id, events[5].event_id],
        [events[2].event_id],
    ]
    assert_job_order_kept(events, fake)


def test_a_jobs_later_event_waits_until_the_retried_earlier_one_is_accepted():
    """v1 of job a is throttled twice: v2 of job a must not go out until v1's third send is accepted,
    else Kinesis would hold v2 before v1."""
    events = [event(1, 1), event(2, 1), event(1, 2), event(2, 2), event(1, 3)]
    fake = FakeKinesis(failures={events[0].event_id: [THROTTLED, THROTTLED]})
    out = publisher(fake)

    assert out.publish(events) == [True] * 5
    assert [call.event_ids for call in fake.calls] == [
        [events[0].event_id, events[1].event_id],
        [events[0].event_id],
        [events[0].event_id],
        [events[2].event_id, events[3].event_id],
        [events[4].event_id],
    ]
    assert_job_order_kept(events, fake)
    assert [event_id for _, event_id in fake.accepted()] == [
        events[1].event_id, events[0].event_id, events[2].event_id, events[3].event_id, events[4].event_id]


def test_an_entry_failing_past_max_retries_stops_its_job_and_everything_after_it():
    a, b, c = 1, 2, 3
    events = [event(a, 1), event(b, 1), event(a, 2), event(b, 2), event(c, 1)]
    fake = FakeKinesis(always={events[0].event_id: THROTTLED})
    sleeps = Sleeps()
    out = publisher(fake, sleeps, max_retries=3)

    published = out.publish(events)

    # a/v1 never made it; a/v2 must not overtake it; b/v2 is not sent either: nothing after that point.
    assert published == [False, True, False, False, True]
    assert [call.event_ids for call in fake.calls] == [
        [events[0].event_id, events[1].event_id, events[4].event_id]] + [[events[0].event_id]] * 3
    assert len(sleeps) == 3
    assert out.stats.requests == 4 and out.stats.retried_entries == 3 and out.stats.failed_entries == 1
    assert out.stats.records == 2
    assert_job_order_kept(events, fake)


def test_stats_accumulate_over_publishes():
    fake = FakeKinesis(failures={event(1, 1).event_id: [THROTTLED], event(2, 2).event_id: [INTERNAL]})
    out = publisher(fake)
    out.publish([event(1, 1), event(2, 1)])
    out.publish([event(2, 2), event(1, 2)])
    assert (out.stats.requests, out.stats.records, out.stats.retried_entries) == (4, 4, 2)
    assert out.stats.error_codes == {THROTTLED: 1, INTERNAL: 1}


@settings(max_examples=150, deadline=None)
@given(
    jobs=st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=40),
    failures=st.lists(st.lists(st.sampled_from([THROTTLED, INTERNAL]), max_size=3), max_size=40),
)
def test_any_schedule_of_retriable_failures_publishes_everything_once_in_job_order(jobs, failures):
    versions: dict[int, int] = {}
    events = []
    for job in jobs:
        versions[job] = versions.get(job, 0) + 1
        events.append(event(job, versions[job]))
    # independent draws: events past the scripts' end have none, scripts past the events' end go unused
    fake = FakeKinesis(failures={e.event_id: list(codes) for e, codes in zip(events, failures, strict=False)})
    out = publisher(fake)

    assert out.publish(events) == [True] * len(events)
    assert sorted(event_id for _, event_id in fake.accepted()) == sorted(e.event_id for e in events)
    assert_job_order_kept(events, fake)
    for job in set(jobs):  # per job, accepted in version order
        accepted = [event_id for _, event_id in fake.accepted() if event_id.startswith(job_id(job))]
        assert accepted == [e.event_id for e in events if e.job_id == job_id(job)]
    assert out.stats.retried_entries == sum(len(codes) for codes in failures[:len(events)])
