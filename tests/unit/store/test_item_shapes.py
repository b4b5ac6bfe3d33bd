"""The job store's items read across releases (onward.domain.schema_versions, the pure builders and readers
of onward/store/dynamo/keys.py): an attribute a newer writer adds is ignored, an item of a newer shape is
refused whole with the reason, and shape 1 is stamped by the attribute's absence so that the readers of the
releases before shapes read every item this release writes.

Through the Lambda handlers and the API: tests/integration/entrypoints/test_upgrade_order.py.
"""

from __future__ import annotations

import pytest

from onward.domain import lifecycle
from onward.domain.lifecycle import Change
from onward.domain.models import Job, NewJob, Run
from onward.domain.schema_versions import ITEM_SHAPE_ATTRIBUTE, NewerSchema
from onward.store.dynamo import keys
from onward.store.dynamo.keys import job_from_values, job_item, result_from_values, run_from_values, run_item

NOW = 1_800_000_000_000
RETENTION_S = 86_400


def queued() -> Job:
    change = lifecycle.create("a" * 32, "acme", NewJob(type="demo.echo"), NOW)
    assert isinstance(change, Change)
    return change.after


def opened() -> Run:
    return Run(job_id="a" * 32, attempt=1, worker_id="w1", claimed_at=NOW, lease_expires_at=NOW + 30_000)


def test_an_attribute_a_newer_writer_adds_is_ignored_by_each_reader():
    """Without it, Job's and Run's extra="forbid" failed every read of an item an upgraded writer touched:
    the claim, GET /jobs/{id} and its runs, while the deploy runs old and new code side by side."""
    job = queued()
    assert job_from_values({**job_item(job, 2, RETENTION_S), "priority_band": "high"}) == (job, 2, 0)
    assert run_from_values({**run_item(opened()), "host": "ip-10-0-0-1"}) == opened()
    assert result_from_values({"value": {"rows": 3}, "checksum": "ab12"}) == {"rows": 3}


def test_shape_one_is_written_without_the_attribute_and_read_without_it():
    """Without the absence standing for shape 1, the readers released before shapes (extra="forbid") failed
    on every item this release writes, and every item written before it would need a backfill."""
    job = queued()
    assert ITEM_SHAPE_ATTRIBUTE not in job_item(job, 1, RETENTION_S)
    assert ITEM_SHAPE_ATTRIBUTE not in run_item(opened())
    assert job_from_values({**job_item(job, 1, RETENTION_S), ITEM_SHAPE_ATTRIBUTE: 1})[0] == job


def test_the_next_shapes_writer_stamps_it_and_this_reader_refuses_it_with_the_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A breaking change of the items (shape 2) read by this release must fail loudly, never read in part:
    without the check, a renamed attribute read as absent (a job shown without its timeout, a run without its
    outcome)."""
    monkeypatch.setattr(keys, "ITEM_SHAPE", 2)  # the next shape's writer
    row, run = job_item(queued(), 1, RETENTION_S), run_item(opened())
    monkeypatch.undo()
    assert row[ITEM_SHAPE_ATTRIBUTE] == run[ITEM_SHAPE_ATTRIBUTE] == 2
    with pytest.raises(NewerSchema, match="job row of schema 2, newer than this reader's 1"):
        job_from_values(row)
    with pytest.raises(NewerSchema, match="run record of schema 2"):
        run_from_values(run)
    with pytest.raises(NewerSchema, match="result of schema 2"):
        result_from_values({"value": 1, ITEM_SHAPE_ATTRIBUTE: 2})
