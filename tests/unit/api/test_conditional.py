"""The entity tags of GET /jobs/{job_id} and If-None-Match's weak comparison (onward/api/conditional.py)."""

from __future__ import annotations

from onward.api import conditional
from onward.domain.models import StatusView
from onward.domain.states import JobState

ROW = {"job_id": "a" * 32, "tenant_id": "acme", "type": "demo.echo", "status": JobState.RUNNING, "version": 2,
       "attempt": 1, "occurred_at": "2026-12-04T10:00:00.000Z", "projected_at": "2026-12-04T10:00:00.100Z",
       "digest": "d1"}


def test_a_tag_changes_with_the_version_and_with_any_field_of_the_row_under_one_version():
    """A tag of the version alone would answer 304 to a row rewritten under the same version (a field another
    projection adds, such as progress): the caller would keep a status the view no longer shows."""
    first = conditional.view_tag(StatusView(**ROW))
    assert first == conditional.view_tag(StatusView(**ROW))  # the same row, the same tag
    assert first.startswith('W/"v2-')
    assert conditional.view_tag(StatusView(**{**ROW, "version": 3})) != first
    assert conditional.view_tag(StatusView(**{**ROW, "projected_at": "2026-12-04T10:00:01.000Z"})) != first
    assert conditional.view_tag(StatusView(**{**ROW, "cancel_requested": True})) != first


def test_if_none_match_compares_weakly_and_takes_lists_and_any():
    """RFC 9110 section 13.1.2: If-None-Match uses the weak comparison (W/ ignored), lists tags, and `*`
    matches any current representation; a tag that is not current, or an empty header, matches nothing (a
    wrong 304 would hide a change)."""
    tag = conditional.view_tag(StatusView(**ROW))
    bare = tag.removeprefix("W/")
    assert conditional.none_match(tag, tag)
    assert conditional.none_match(bare, tag)  # the strong form of the same tag
    assert conditional.none_match(f'W/"other", {tag}', tag)
    assert conditional.none_match(" * ", tag)
    assert not conditional.none_match(None, tag)
    assert not conditional.none_match("", tag)
    assert not conditional.none_match(' , W/"v1-0000000000000000"', tag)
    assert not conditional.none_match(conditional.PENDING_TAG, tag)
    assert conditional.archived_tag(3) != conditional.archived_tag(4)


def test_the_openapi_document_gives_get_job_its_etag_its_if_none_match_and_a_304_without_content():
    """A client generated from /openapi.json must know the 304 (else it is an undocumented answer) and that it
    has no body; Powertools gives every answer the route's return type as content unless the document drops it."""
    from onward.api.app import openapi_document

    operation = openapi_document()["paths"]["/jobs/{job_id}"]["get"]
    assert "ETag" in operation["responses"]["200"]["headers"] and "content" in operation["responses"]["200"]
    assert "ETag" in operation["responses"]["304"]["headers"] and "content" not in operation["responses"]["304"]
    assert {(parameter["name"], parameter["in"]) for parameter in operation["parameters"]} >= {
        ("If-None-Match", "header")}
    deleted = openapi_document()["paths"]["/schedules/{name}"]["delete"]["responses"]["204"]
    assert "content" not in deleted
