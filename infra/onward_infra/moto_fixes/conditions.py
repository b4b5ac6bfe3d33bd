"""Condition expressions. moto parses a condition expression (a ConditionExpression, a FilterExpression, a
KeyConditionExpression's filter) every time it meets one, twice per item of a TransactWriteItems (the
request's validation, then the write): about 40% of a claim-shaped transaction's time in moto. The platform
sends a few dozen expressions, each again and again with other values.

`ConditionExpressionParser.parse` is kept per expression, its attribute names and the type of each of its
attribute values. moto's tree holds the values themselves (each `AttributeValue` operand a copy of one
value's type and contents), and nothing in the parse reads a value's contents, only its type (a BETWEEN
refuses a NULL bound). So the first time an expression is met it is parsed with stand-ins for the values'
contents (`_ValueOf`: the name of the value each stands for), and the tree kept as a pickle; each use
unpickles a fresh tree and puts the request's values in place of the stand-ins. An expression whose parse
with stand-ins raises (an invalid expression, a value missing or misnamed) is parsed by moto as it is,
each time, and raises moto's own error.

`names_found`: the attribute names a parse finds, for a caller that wants only those (TransactWriteItems'
validation parses each condition to check that every ExpressionAttributeNames entry is used, and discards
the tree): read from the kept parse, no tree built.
"""

from __future__ import annotations

import pickle
from typing import Any

from moto.dynamodb.comparisons import AttributeValue, ConditionExpressionParser, Func, Op

from onward_infra.moto_fixes.expression_cache import ExpressionCache

_original_parse = ConditionExpressionParser.parse

# (expression, names, (value name, its type) ...) -> (the tree's pickle, names found, values found)
_Key = tuple[str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]
_kept: ExpressionCache[_Key, tuple[bytes, list[str], list[str]]] = ExpressionCache()


class _ValueOf:
    """Stands for the contents of the attribute value `name` in a kept tree."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return _ValueOf, (self.name,)


def parse(self: ConditionExpressionParser) -> Op | Func:
    """moto's tree for the parser's expression, names and values, parsed once per expression, names and
    value types."""
    key = _key(self)
    if key is None:
        return _original_parse(self)
    kept = _kept.get(key)
    if kept is None:
        kept = _keep(key, self)
        if kept is None:
            return _original_parse(self)  # raises moto's error, or parses what stand-ins could not
    tree_pickle, names_found, values_found = kept
    tree = pickle.loads(tree_pickle)
    _put_values(tree, self.expression_attribute_values or {}, set())
    self.expr_attr_names_found = list(names_found)
    self.expr_attr_values_found = list(values_found)
    return tree  # type: ignore[no-any-return]


def names_found(expression: str | None, names: dict[str, str] | None,
                values: dict[str, dict[str, Any]] | None) -> list[str]:
    """`expr_attr_names_found` of moto's parse of a condition expression (a fresh list), raising what that
    parse raises; without building a tree when the expression's parse is kept."""
    parser = ConditionExpressionParser(expression, names, values)
    key = _key(parser)
    kept = None if key is None else _kept.get(key)
    if kept is None:
        parser.parse()  # (ours once installed: keeps the parse for next time)
        return parser.expr_attr_names_found
    return list(kept[1])


def forget() -> None:
    """Drop every kept expression."""
    _kept.clear()


def _key(parser: ConditionExpressionParser) -> _Key | None:
    """The parse's key: None when the parse is moto's each time (no expression, or values of another shape
    than DynamoDB's one-type maps)."""
    expression, names, values = (parser.condition_expression, parser.expression_attribute_names,
                                 parser.expression_attribute_values)
    if not isinstance(expression, str) or not expression:
        return None
    if not isinstance(names, dict | None) or not isinstance(values, dict | None):
        return None
    types = []
    for name, value in (values or {}).items():
        if not isinstance(value, dict) or len(value) != 1:
            return None
        types.append((name, next(iter(value))))
    return expression, tuple(sorted((names or {}).items())), tuple(sorted(types))


def _keep(key: _Key, parser: ConditionExpressionParser) -> tuple[bytes, list[str], list[str]] | None:
    """Parse the expression with stand-ins for the values' contents and keep the tree; None when that parse
    raises or its tree does not pickle."""
    expression, names, types = key
    stand_ins: dict[str, dict[str, Any]] = {name: {kind: _ValueOf(name)} for name, kind in types}
    template = ConditionExpressionParser(
        expression, None if parser.expression_attribute_names is None else dict(names),
        None if parser.expression_attribute_values is None else stand_ins)
    try:
        tree = _original_parse(template)
        tree_pickle = pickle.dumps(tree, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - moto's own parse of the real request raises its error
        return None
    return _kept.keep(key, (tree_pickle, list(template.expr_attr_names_found),
                            list(template.expr_attr_values_found)))


def _put_values(node: Any, values: dict[str, dict[str, Any]], seen: set[int]) -> None:
    """Put each value's contents in place of its stand-in, everywhere in the tree (shared nodes once)."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, AttributeValue):
        if isinstance(node.value, _ValueOf):
            node.value = values[node.value.name][node.type]
        return
    if isinstance(node, Op | Func):
        for member in vars(node).values():
            _put_values(member, values, seen)
    elif isinstance(node, list | tuple):
        for member in node:
            _put_values(member, values, seen)


PATCHES = ((ConditionExpressionParser, "parse", parse),)
