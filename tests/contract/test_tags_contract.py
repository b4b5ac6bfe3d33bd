"""Tags on both backends (in memory and on DynamoDB), through the `store_backend` fixture: a job's tags, given at
create (alone or in a batch), are on its stored row and on every event of it in the outbox, through claim and
completion; a job without tags stores no `tags` attribute at all (its items are as before tags existed).

Without `tags` on the Job (onward.domain.models) a backend would drop them at create; without them on
OutboxEvent.of the events after the first would carry none, and the projector would write the view row of a
claimed or finished job without its tags (its tag entries would stay at the created version, then expire
with the wrong TTL)."""

from __future__ import annotations

from onward.domain.models import NewJob
from onward.store.service import JobStore

TAGS = {"env": "prod", "team": "red"}


def test_tags_are_on_the_row_and_every_event_and_absent_when_none(backend, store: JobStore) -> None:
    tagged = store.create("acme", NewJob(type="demo.echo", tags=TAGS)).job.job_id
    plain = store.create("acme", NewJob(type="demo.echo")).job.job_id
    batched = [answer.job.job_id for answer in store.create_batch(
        "acme", [(NewJob(type="demo.echo", tags={"env": "dev"}), None)])]
    lease = store.claim("w1", 30)
    while lease is not None:
        store.complete(lease, {"ok": True})
        lease = store.claim("w1", 30)

    assert store.get(tagged).tags == TAGS and store.get(plain).tags is None
    assert store.get(batched[0]).tags == {"env": "dev"}
    rows = {item["job_id"]: item for item in backend.jobs_table() if item.get("entity") == "job"}
    assert rows[tagged]["tags"] == TAGS and "tags" not in rows[plain]
    events: dict[str, list[dict]] = {}
    for event in backend.outbox_table():
        events.setdefault(event["job_id"], []).append(event)
    assert [event["version"] for event in sorted(events[tagged], key=lambda e: e["version"])] == [1, 2, 3]
    assert all(event["tags"] == TAGS for event in events[tagged])
    assert all(event["tags"] == {"env": "dev"} for event in events[batched[0]])
    assert all("tags" not in event for event in events[plain])
