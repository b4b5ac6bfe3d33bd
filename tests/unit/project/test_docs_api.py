"""docs/api.md's route section is rendered from the API's own OpenAPI document (onward/api/openapi.py,
what GET /openapi.json serves) by tools/render_api_docs.py. Without these tests a route added, removed or
changed (a status, a parameter, a body field) would leave the documented route table describing an API that
no longer exists, and nobody would notice until a client followed it."""

from __future__ import annotations

import pytest

from onward.api.openapi import DOCUMENT
from tools.render_api_docs import API_DOCS, BEGIN, END, METHODS, render, updated


def test_the_route_section_of_docs_api_is_what_the_routes_render():
    """Fails when docs/api.md differs from the rendering of today's routes: run tools/render_api_docs.py."""
    text = API_DOCS.read_text()
    assert updated(text, render(DOCUMENT)) == text, (
        "docs/api.md's route section is stale: run .venv/bin/python tools/render_api_docs.py")


def test_every_operation_of_the_document_has_a_row_and_a_section():
    """The rendering leaves no operation out: each method and path the document holds (tests/integration/
    test_api.py holds the document to the app's routes) has its row in the table and a section of its own."""
    rendered = render(DOCUMENT)
    operations = [(method.upper(), path) for path, item in DOCUMENT["paths"].items()
                  for method in item if method in METHODS]
    assert len(operations) > 20
    missing = [(method, path) for method, path in operations
               if f"| {method} | `{path}` |" not in rendered or f"### `{method} {path}`" not in rendered]
    assert missing == []


def test_every_status_an_operation_answers_is_rendered_with_its_description():
    rendered = render(DOCUMENT)
    answers = DOCUMENT["paths"]["/jobs"]["post"]["responses"]
    assert set(answers) >= {"202", "409", "422"}
    for status, answer in answers.items():
        assert f"| {status} | {' '.join(answer['description'].split())}" in rendered


def test_the_hand_written_prose_around_the_markers_is_kept():
    text = f"before\n{BEGIN}\nold table\n{END}\nafter\n"
    assert updated(text, f"{BEGIN}\nnew\n{END}") == f"before\n{BEGIN}\nnew\n{END}\nafter\n"


@pytest.mark.parametrize("text", ["no markers at all", f"{END}\n{BEGIN}\n", f"{BEGIN} but no end"])
def test_a_page_without_both_markers_in_order_is_refused(text):
    with pytest.raises(ValueError, match="markers"):
        updated(text, "rendered")
