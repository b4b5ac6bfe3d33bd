"""Condition expressions parsed once per expression, names and value types (infra/onward_infra/moto_fixes/conditions.py)
give exactly moto's own parse: the same tree, the same names and values found, the same answer for every
item, the same error. Compared expression by expression with moto's parse of the same request, over the
platform's shapes and random ones (hypothesis), each expression used again with other values."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto.dynamodb.comparisons import ConditionExpressionParser
from moto.dynamodb.models.dynamo_type import DynamoType, Item

from onward_infra.moto_fixes import conditions

pytestmark = pytest.mark.integration

PATHS = ("state", "version", "#v", "#s", "attempt", "m.inner", "l[0]", "tags")
NAMES = {"#v": "version", "#s": "state"}
VALUES = (":a", ":b", ":c")

# The platform's own conditions (onward/store/dynamo/recorder.py, onward/pipeline/checkpoints.py,
# onward/pipeline/projector/...)
PLATFORM = (
    "attribute_not_exists(pk)",
    "#v = :a AND #s = :b",
    "attribute_not_exists(sequence_number) OR sequence_number < :a",
    "attribute_not_exists(version) OR version < :a",
    "attempt = :a AND lease_owner = :b",
    "running < :a",
    "#s IN (:a, :b) AND version = :c",
)


def _value() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(lambda s: {"S": s}, st.sampled_from(["", "queued", "running", "q", "zz"])),
        st.builds(lambda n: {"N": str(n)}, st.integers(-3, 3)),
        st.just({"NULL": True}),
        st.builds(lambda b: {"BOOL": b}, st.booleans()),
        st.builds(lambda xs: {"SS": xs}, st.lists(st.sampled_from(["a", "b", "queued"]), min_size=1, max_size=2,
                                                  unique=True)),
        st.builds(lambda xs: {"L": xs}, st.lists(st.builds(lambda n: {"N": str(n)}, st.integers(0, 2)), max_size=2)),
    )


def _condition() -> st.SearchStrategy[str]:
    path, value = st.sampled_from(PATHS), st.sampled_from(VALUES)
    atoms = st.one_of(
        st.builds("attribute_exists({})".format, path),
        st.builds("attribute_not_exists({})".format, path),
        st.builds("{} {} {}".format, path, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), value),
        st.builds("begins_with({}, {})".format, path, value),
        st.builds("contains({}, {})".format, path, value),
        st.builds("size({}) > {}".format, path, value),
        st.builds("{} BETWEEN {} AND {}".format, path, value, value),
        st.builds("{} IN ({}, {})".format, path, value, value),
        st.builds("attribute_type({}, {})".format, path, value),
        st.sampled_from(["version = :missing", "#unknown = :a", "state = = :a", "size(:a) > :b"]),  # errors
    )
    return st.recursive(atoms, lambda inner: st.one_of(
        st.builds("{} AND {}".format, inner, inner), st.builds("{} OR {}".format, inner, inner),
        st.builds("NOT {}".format, inner), st.builds("({})".format, inner)), max_leaves=4)


def _item() -> st.SearchStrategy[Item]:
    attributes = st.fixed_dictionaries({}, optional={
        "state": _value(), "version": _value(), "attempt": _value(), "tags": _value(),
        "m": st.builds(lambda v: {"M": {"inner": v}}, _value()),
        "l": st.builds(lambda v: {"L": [v]}, _value()),
    })
    return attributes.map(lambda attrs: Item(DynamoType({"S": "JOB#1"}), DynamoType({"S": "JOB"}), attrs))


def _outcome(parse: Any, expression: str, values: dict[str, Any], items: list[Item]) -> Any:
    """What a parse of `expression` with `values` gives: its tree, names and values found, and each item's
    answer (or the error), or the parse's error."""
    parser = ConditionExpressionParser(expression, dict(NAMES), values)
    try:
        tree = parse(parser)
    except Exception as error:  # noqa: BLE001 - the error itself is compared
        return "raised", type(error).__name__, str(error)
    answers = []
    for item in items:
        try:
            answers.append(tree.expr(item))
        except Exception as error:  # noqa: BLE001
            answers.append((type(error).__name__, str(error)))
    return _shape(tree), parser.expr_attr_names_found, parser.expr_attr_values_found, answers


def _shape(node: Any) -> Any:
    """A tree as nested tuples: each node's class and members (moto's repr fails on a list index path)."""
    if isinstance(node, list | tuple):
        return tuple(_shape(member) for member in node)
    if hasattr(node, "__dict__"):
        return type(node).__name__, tuple((name, _shape(member)) for name, member in sorted(vars(node).items()))
    return node


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=st.one_of(st.sampled_from(PLATFORM), _condition()),
       uses=st.lists(st.dictionaries(st.sampled_from(VALUES), _value(), min_size=2, max_size=3), min_size=2,
                     max_size=3),
       items=st.lists(_item(), min_size=1, max_size=3))
def test_a_kept_parse_gives_what_moto_s_parse_gives(expression: str, uses: list[dict[str, Any]],
                                                    items: list[Item]) -> None:
    """Breaks if a kept tree held the values of the request that first parsed it (the second use's answers
    would differ), if its stand-ins were left in place of a value, if names or values found were not kept,
    or if an expression moto refuses were answered from the cache."""
    conditions.forget()
    for values in uses:  # the first use parses and keeps, the next ones unpickle and fill in
        assert _outcome(conditions.parse, expression, values, items) == \
            _outcome(conditions._original_parse, expression, values, items)


def test_an_expression_is_parsed_once_for_any_values_of_the_same_types(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the cache: without it every use parses again."""
    conditions.forget()
    parses: list[str | None] = []

    def counting(parser: ConditionExpressionParser) -> Any:
        parses.append(parser.condition_expression)
        return original(parser)

    original = conditions._original_parse
    monkeypatch.setattr(conditions, "_original_parse", counting)
    item = Item(DynamoType({"S": "JOB#1"}), DynamoType({"S": "JOB"}), {"version": {"N": "3"}, "state": {"S": "q"}})
    answers = [conditions.parse(ConditionExpressionParser("#v = :a AND #s = :b", dict(NAMES),
                                                          {":a": {"N": str(n)}, ":b": {"S": "q"}})).expr(item)
               for n in range(5)]
    assert answers == [False, False, False, True, False] and len(parses) == 1
    conditions.parse(ConditionExpressionParser("#v = :a AND #s = :b", dict(NAMES),
                                               {":a": {"S": "3"}, ":b": {"S": "q"}}))  # another type: parsed
    assert len(parses) == 2
