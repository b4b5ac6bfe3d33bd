"""The archived job's answer (onward.api.contract.jobs.ArchivedJobStatus.of): what the archive keeps of a
result and of the params is shown only when it is whole."""

from __future__ import annotations

import pytest

from onward.api.contract.jobs import ArchivedJobStatus
from tests.unit.operator.archive_samples import job_id, record

pytestmark = pytest.mark.fast


def test_a_small_result_is_inline_and_a_cut_one_is_only_its_size() -> None:
    """Without the size check, a result the archive cut at 1 KiB would be parsed (and fail) or shown cut."""
    small = record(job_id(1)).model_copy(update={"result_size_bytes": 11, "result_summary": '{"ok":true}'})
    shown = ArchivedJobStatus.of(small).result
    assert shown is not None and shown.inline == {"ok": True}
    cut = record(job_id(2)).model_copy(update={"result_size_bytes": 5000, "result_summary": '{"rows":[1,2'})
    answer = ArchivedJobStatus.of(cut)
    assert answer.result is not None and answer.result.size_bytes == 5000 and answer.result.inline is None


def test_params_cut_by_the_archive_are_null_and_whole_ones_are_shown() -> None:
    whole = record(job_id(3)).model_copy(update={"params_json": '{"n":1}'})
    assert ArchivedJobStatus.of(whole).params == {"n": 1}
    cut = record(job_id(4)).model_copy(update={"params_json": '{"blob":"aaa', "params_truncated": True})
    assert ArchivedJobStatus.of(cut).params is None


def test_the_answer_is_marked_archived_final_and_carries_its_runs() -> None:
    answer = ArchivedJobStatus.of(record(job_id(5), attempts=3, state="dead"))
    assert answer.archived is True and answer.terminal is True and answer.status.value == "dead"
    assert [run.attempt for run in answer.runs] == [1, 2, 3]
    assert answer.runs[0].error is not None and answer.runs[0].error.error_type == "Boom"
