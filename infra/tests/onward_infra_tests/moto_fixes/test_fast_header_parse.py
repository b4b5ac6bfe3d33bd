"""The endpoint's request-header parse (infra/onward_infra/moto_fixes/connections.py `parse_headers`) gives the same
message as http.client's own (the email package's feed parser) for any header block, plain or not."""

from __future__ import annotations

import http.client
import io

from hypothesis import given, settings
from hypothesis import strategies as st

from onward_infra.moto_fixes.connections import _original_parse_headers, parse_headers

_name = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E, blacklist_characters=":"), min_size=1,
                max_size=12)
_value = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=20)
_plain = st.builds(lambda name, spaces, value: f"{name}:{spaces}{value}", _name, st.sampled_from(["", " ", "  ", "\t"]),
                   _value)
_odd = st.sampled_from([" folded continuation", "\tfolded", "no colon here", "From someone", ": empty name",
                        "Spaced Name: x", "X-Empty:", "X-Colons: a:b:c"])
_line = st.one_of(_plain, _plain, _plain, _odd)


def _messages(block: bytes) -> tuple[http.client.HTTPMessage, http.client.HTTPMessage]:
    return parse_headers(io.BytesIO(block)), _original_parse_headers(io.BytesIO(block))


@settings(max_examples=400, deadline=None)
@given(lines=st.lists(_line, max_size=8), ending=st.sampled_from(["\r\n", "\n"]), rest=st.binary(max_size=8))
def test_any_header_block_parses_as_the_email_parser_parses_it(lines: list[str], ending: str, rest: bytes) -> None:
    """Names, values (their leading blanks dropped, inner ones kept), order, repeats, and what `get` answers,
    for plain blocks and for blocks with folded, nameless or oddly named lines (which take the email parser's
    way); and the bytes after the blank line are left unread for the body. A mutant that stripped trailing
    blanks, lower-cased names or parsed a folded line itself would differ here."""
    block = ("".join(line + ending for line in lines) + ending).encode("iso-8859-1") + rest
    ours, theirs = _messages(block)
    assert list(ours.items()) == list(theirs.items())
    assert [(type(defect), str(defect)) for defect in ours.defects] == [(type(defect), str(defect))
                                                                      for defect in theirs.defects]
    for name in {name.lower() for name in theirs}:
        assert ours.get(name) == theirs.get(name)
        assert ours.get_all(name) == theirs.get_all(name)


def test_the_body_after_the_headers_is_left_to_read() -> None:
    stream = io.BytesIO(b"Content-Length: 4\r\nX-Amz-Target: DynamoDB_20120810.GetItem\r\n\r\nbody")
    message = parse_headers(stream)
    assert message["content-length"] == "4" and message.get("x-amz-target") == "DynamoDB_20120810.GetItem"
    assert stream.read() == b"body"
