"""ONWARD_TRACE_URL (onward.observability.trace_links): validated at start with the reason, and the link made from
it for a job's trace."""

from __future__ import annotations

import pytest

from onward.observability.trace_links import TRACE_URL_VARIABLE, trace_link, trace_url_template
from onward.settings import InvalidSetting, Settings

pytestmark = pytest.mark.fast

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_a_template_makes_the_traces_link_and_none_without_a_trace_or_a_template() -> None:
    template = trace_url_template({TRACE_URL_VARIABLE: "https://ui.example.com/trace/{trace_id}?tab=spans"})
    assert trace_link(template, TRACE) == f"https://ui.example.com/trace/{TRACE}?tab=spans"
    assert trace_link(template, None) is None
    assert trace_link(None, TRACE) is None
    assert trace_url_template({}) is None and trace_url_template({TRACE_URL_VARIABLE: "  "}) is None


@pytest.mark.parametrize("bad", ["ui.example.com/trace/{trace_id}", "javascript:alert({trace_id})",
                                 "https://ui.example.com/trace/", "https://ui/{trace_id}/{trace_id}",
                                 "https://ui/{trace_id}?span={span_id}"])
def test_an_unusable_template_is_refused_at_start_naming_the_variable(bad: str) -> None:
    """Catches a template that would make links to nowhere (no placeholder), into the page's own origin (no
    scheme), run script (javascript:), or keep a placeholder nobody fills."""
    with pytest.raises(InvalidSetting, match=TRACE_URL_VARIABLE):
        Settings.from_environment({TRACE_URL_VARIABLE: bad})
