"""The versioning rule (onward/domain/schema_versions.py): a reader reads its major and the previous one,
refuses a newer one with a reason that says what to do, and refuses what is no version at all."""

from __future__ import annotations

import pytest

from onward.domain.schema_versions import (
    NewerSchema,
    UnknownSchema,
    check_major,
    item_shape,
    known_fields,
    readable_majors,
)


def test_a_reader_reads_its_major_and_the_previous_one_only():
    """Without the previous major, a breaking change had no two-step deploy: the readers of the new major
    would refuse what the writers not yet upgraded still write."""
    assert readable_majors(1) == {1}
    assert readable_majors(3) == {2, 3}
    assert check_major("event", 2, 3) == 2
    with pytest.raises(UnknownSchema, match=r"reads \[2, 3\]"):
        check_major("event", 1, 3)


def test_a_newer_major_is_refused_with_what_to_do():
    with pytest.raises(NewerSchema) as error:
        check_major("event", 4, 3)
    assert str(error.value).startswith("event of schema 4, newer than this reader's 3")
    assert str(error.value).endswith("upgrade this reader, then re-drive it")
    assert (error.value.found, error.value.current) == (4, 3)


@pytest.mark.parametrize("found", [None, "1", 1.0, True, 0, -1])
def test_what_is_no_version_is_refused(found: object):
    """True is an int to Python and 1.0 equals 1: neither is a version a writer of this contract writes."""
    with pytest.raises(UnknownSchema):
        check_major("event", found, 1)


def test_an_item_without_a_shape_is_shape_one_and_unknown_fields_are_dropped():
    assert item_shape({"pk": "JOB#a"}, "job row") == 1
    assert known_fields({"a": 1, "b": 2}, {"a"}) == {"a": 1}
