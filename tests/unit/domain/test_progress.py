"""The progress rule (onward/domain/progress.py): how a progress event is ordered against the job's transitions
in the status view, and what a handler may report."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from onward.domain.progress import (
    MAX_PROGRESS_MESSAGE,
    ProgressEvent,
    ProgressOutcome,
    checked_progress,
    judge_progress,
    latest_progress,
    progress_event,
)
from onward.pipeline.projector.records import parse_record
from onward.pipeline.relay.publisher import encode

A, D, S = ProgressOutcome.APPLIED, ProgressOutcome.DUPLICATE, ProgressOutcome.SUPERSEDED


def update(version: int = 2, seq: int = 1, attempt: int = 1, fraction: float = 0.5):
    return progress_event("j1", "acme", version, attempt, seq, fraction, f"step {seq}", 1_800_000_000_000)


def row(version: int = 2, status: str = "running", attempt: int = 1, progress_seq: int | None = None):
    held = {"version": version, "status": status, "attempt": attempt}
    return held if progress_seq is None else {**held, "progress_seq": progress_seq}


def test_progress_applies_only_to_the_running_row_of_its_version_and_attempt():
    """Without the version test a progress event delivered after the completion (view at v3) would be applied
    to the final status; without the status and attempt tests, to a row another attempt now runs."""
    assert judge_progress(row(), update()) is A
    assert judge_progress(row(version=3, status="succeeded"), update()) is S  # arrived after the completion
    assert judge_progress(row(version=3), update()) is S  # a cancel request (v3) came after it
    assert judge_progress(row(version=1, status="queued"), update()) is S  # ahead of its own running event
    assert judge_progress(row(status="queued"), update()) is S
    assert judge_progress(row(attempt=2), update()) is S
    assert judge_progress(None, update()) is S  # no row: never creates one


def test_a_duplicate_is_a_no_op_and_an_older_seq_is_dropped():
    """Without the seq test a redelivered older update would move the shown progress backwards."""
    assert judge_progress(row(progress_seq=4), update(seq=5)) is A
    assert judge_progress(row(progress_seq=5), update(seq=5)) is D
    assert judge_progress(row(progress_seq=5), update(seq=3)) is S


def test_a_batch_writes_the_newest_update_unless_a_transition_of_it_moved_past():
    """The projector writes one update per job and batch: without the version filter a batch holding
    [progress v2, succeeded v3] would write the v2 update after the completion (refused, but a wasted write)."""
    events = [update(seq=1), update(seq=3), update(seq=2)]
    assert latest_progress(events, None).seq == 3
    assert latest_progress(events, 2).seq == 3
    assert latest_progress(events, 3) is None
    assert latest_progress([update(seq=7), update(version=3, seq=8)], 3).seq == 8


@pytest.mark.parametrize("fraction", [-0.01, 1.5, math.nan, math.inf, "0.5", True, None])
def test_a_fraction_outside_0_to_1_is_the_handlers_bug_said_at_once(fraction):
    """Without the check a bad value would reach the store (refused there, far from the handler's line)."""
    with pytest.raises(ValueError, match="fraction"):
        checked_progress(fraction, None)  # type: ignore[arg-type]


def test_a_long_message_is_cut_and_kept_valid_unicode():
    fraction, message = checked_progress(1, "x" * 500 + "\ud800")
    assert (fraction, len(message)) == (1.0, MAX_PROGRESS_MESSAGE)
    assert checked_progress(0.5, "caf\ud800")[1] == "caf\\ud800"


GOLDEN = Path(__file__).resolve().parents[2] / "events" / "progress_event_v1.json"


def test_the_golden_progress_event_reads_and_is_written_back_field_for_field():
    """The wire format other consumers of the events stream read (and skip by `kind`): a renamed or added field
    would break them silently; this sample is the contract (tests/events/progress_event_v1.json)."""
    sample = json.loads(GOLDEN.read_text())
    read = parse_record(GOLDEN.read_bytes())
    assert isinstance(read, ProgressEvent)
    assert json.loads(encode(read)) == sample
